package ppo

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/trainyard/trainyard/internal/learner"
)

// Fragment is one rollout worker's share of an iteration: NumSteps steps of
// NumEnvs envs, time-major (t·NumEnvs + env), acted with one weight
// version. It carries everything the trainer's PPO update needs, so the
// trainer never steps an env:
//
//   - Obs: the observations as the policy saw them (normalised with the
//     worker's running statistics, which start from the weights' and take
//     in each step as the in-process learner's do), so the log-probs and
//     values recorded with them are exactly the behaviour policy's;
//   - Actions in the network's form (discrete: the index; Gaussian: the
//     unclipped sample), LogProbs and Values;
//   - Rewards: scaled (when reward normalisation is on) and, where a time
//     limit cut an episode, already bootstrapped with γ·V(final obs);
//   - Terminated/Truncated per step (either ends the episode for GAE);
//   - NextValues: V of each env's observation after the last step (GAE's
//     bootstrap);
//   - ObsStats/RetStats: the running statistics of just this fragment's raw
//     observations and discounted returns, which the trainer merges into its
//     own (Chan's parallel update) before publishing the next weights;
//   - the undiscounted returns and lengths of episodes that ended in it.
type Fragment struct {
	Iteration     int64  `json:"iteration"`      // the iteration it feeds (WeightVersion+1)
	WeightVersion int64  `json:"weight_version"` // the Weights.Version it was acted with
	Generation    string `json:"generation"`     // the trainer session that published them
	Worker        int    `json:"worker"`
	Node          string `json:"node,omitempty"`
	NumEnvs       int    `json:"num_envs"`
	NumSteps      int    `json:"num_steps"`
	ObsDim        int    `json:"obs_dim"`
	ActDim        int    `json:"act_dim"`
	// RolloutSeconds is the wall time the worker spent stepping.
	RolloutSeconds float64      `json:"rollout_seconds"`
	ObsStats       RunningStats `json:"obs_stats"`
	RetStats       RunningStats `json:"ret_stats"`
	EpisodeReturns []float64    `json:"episode_returns"`
	EpisodeLengths []int64      `json:"episode_lengths"`
	// MaskDim is the action count of a masked env (envs.Spec.ActionMask),
	// 0 without masks.
	MaskDim int `json:"mask_dim,omitempty"`

	Obs        []float64 `json:"-"` // NumSteps·NumEnvs × ObsDim
	Actions    []float64 `json:"-"` // NumSteps·NumEnvs × ActDim
	LogProbs   []float64 `json:"-"` // NumSteps·NumEnvs
	Values     []float64 `json:"-"`
	Rewards    []float64 `json:"-"`
	Terminated []bool    `json:"-"`
	Truncated  []bool    `json:"-"`
	NextValues []float64 `json:"-"` // NumEnvs
	Mask       []bool    `json:"-"` // NumSteps·NumEnvs × MaskDim: the legal actions at each step
}

// RunningStats are mean, variance and count of a batch of samples (Count
// 0: none).
type RunningStats struct {
	Mean  []float64 `json:"mean"`
	Var   []float64 `json:"var"`
	Count float64   `json:"count"`
}

// RolloutInfo says who produced one fragment of an iteration.
type RolloutInfo = learner.RolloutInfo

// Fragment format, version 1 (little-endian):
//
//	magic   "TYFRAGv1"
//	hdrLen  uint32, then hdrLen bytes of JSON (the Fragment's tagged fields)
//	obs, actions, log-probs, values, rewards, next values: float64 each
//	terminated, truncated: bitmaps of ⌈steps·envs/8⌉ bytes each
//	mask: a bitmap of ⌈steps·envs·mask_dim/8⌉ bytes (none when mask_dim is 0)
//	sha256 of everything above
const fragMagic = "TYFRAGv1"

// ErrFragment marks bytes that are not a well-formed fragment.
var ErrFragment = errors.New("bad rollout fragment")

// Limits a decoder enforces before it allocates anything.
const (
	maxFragEnvs = 1 << 16
	maxFragDim  = 1 << 16
)

// Encode serialises f (its slices must have the sizes its fields imply).
func (f *Fragment) Encode() ([]byte, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	hdr, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("ppo: fragment header: %w", err)
	}
	tn := f.NumSteps * f.NumEnvs
	var b bytes.Buffer
	b.Grow(len(fragMagic) + 4 + len(hdr) + 8*(tn*(f.ObsDim+f.ActDim+3)+f.NumEnvs) + 2*(tn+7)/8 + sha256.Size)
	b.WriteString(fragMagic)
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(hdr))))
	b.Write(hdr)
	var w [8]byte
	for _, vec := range [][]float64{f.Obs, f.Actions, f.LogProbs, f.Values, f.Rewards, f.NextValues} {
		for _, v := range vec {
			binary.LittleEndian.PutUint64(w[:], math.Float64bits(v))
			b.Write(w[:])
		}
	}
	for _, bits := range [][]bool{f.Terminated, f.Truncated, f.Mask} {
		if len(bits) == 0 {
			continue // no mask
		}
		bm := make([]byte, (len(bits)+7)/8)
		for i, v := range bits {
			if v {
				bm[i/8] |= 1 << (i % 8)
			}
		}
		b.Write(bm)
	}
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes(), nil
}

// check validates the sizes (Encode's and DecodeFragment's shared rules).
func (f *Fragment) check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("ppo: %w: %s", ErrFragment, fmt.Sprintf(format, a...))
	}
	switch {
	case f.NumEnvs < 1 || f.NumEnvs > maxFragEnvs:
		return bad("num_envs %d outside [1,%d]", f.NumEnvs, maxFragEnvs)
	case f.NumSteps < 1 || f.NumSteps > maxSteps:
		return bad("num_steps %d outside [1,%d]", f.NumSteps, maxSteps)
	case f.ObsDim < 1 || f.ObsDim > maxFragDim || f.ActDim < 1 || f.ActDim > maxFragDim || f.MaskDim < 0 || f.MaskDim > maxFragDim:
		return bad("obs_dim %d / act_dim %d / mask_dim %d outside [1,%d]", f.ObsDim, f.ActDim, f.MaskDim, maxFragDim)
	case int64(f.NumSteps)*int64(f.NumEnvs)*int64(max(f.ObsDim, f.ActDim)) > maxRollout:
		return bad("%d steps × %d envs × %d values is too large", f.NumSteps, f.NumEnvs, max(f.ObsDim, f.ActDim))
	case f.Worker < 0 || f.Iteration < 1 || f.WeightVersion < 0:
		return bad("worker %d, iteration %d, weight version %d", f.Worker, f.Iteration, f.WeightVersion)
	case len(f.EpisodeReturns) != len(f.EpisodeLengths):
		return bad("%d episode returns but %d lengths", len(f.EpisodeReturns), len(f.EpisodeLengths))
	case math.IsNaN(f.RolloutSeconds) || math.IsInf(f.RolloutSeconds, 0) || f.RolloutSeconds < 0:
		return bad("rollout_seconds %v", f.RolloutSeconds)
	}
	for _, st := range []struct {
		name string
		s    RunningStats
		dim  int
	}{{"obs_stats", f.ObsStats, f.ObsDim}, {"ret_stats", f.RetStats, 1}} {
		if st.s.Count == 0 && len(st.s.Mean) == 0 && len(st.s.Var) == 0 {
			continue // none collected (normalisation off)
		}
		if len(st.s.Mean) != st.dim || len(st.s.Var) != st.dim || !(st.s.Count >= 0) || math.IsInf(st.s.Count, 0) {
			return bad("%s: %d means, %d variances (want %d), count %v", st.name, len(st.s.Mean), len(st.s.Var), st.dim, st.s.Count)
		}
	}
	tn := f.NumSteps * f.NumEnvs
	for _, v := range []struct {
		name      string
		got, want int
	}{
		{"obs", len(f.Obs), tn * f.ObsDim}, {"actions", len(f.Actions), tn * f.ActDim},
		{"log_probs", len(f.LogProbs), tn}, {"values", len(f.Values), tn}, {"rewards", len(f.Rewards), tn},
		{"terminated", len(f.Terminated), tn}, {"truncated", len(f.Truncated), tn},
		{"next_values", len(f.NextValues), f.NumEnvs}, {"mask", len(f.Mask), tn * f.MaskDim},
	} {
		if v.got != v.want {
			return bad("%s has %d values, want %d", v.name, v.got, v.want)
		}
	}
	return nil
}

// openSealed checks the envelope fragments and weights share: magic,
// uint32 header length, JSON header, payload, trailing sha256 of all
// before it. It returns the header and the payload, or why it refuses.
func openSealed(data []byte, magic, what string) (hdr, payload []byte, reason string) {
	if len(data) < len(magic)+4+sha256.Size || string(data[:len(magic)]) != magic {
		return nil, nil, "not " + what
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, nil, "sha256 mismatch (corrupt or truncated)"
	}
	p := len(magic)
	hl := int64(binary.LittleEndian.Uint32(body[p:]))
	p += 4
	if hl > int64(len(body)-p) {
		return nil, nil, fmt.Sprintf("header length %d exceeds the data", hl)
	}
	return body[p : p+int(hl)], body[p+int(hl):], ""
}

// DecodeFragment parses bytes written by Encode. It checks the trailing
// sha256 and every size before allocating, so corrupt or hostile input
// gives ErrFragment, never a panic or a huge allocation.
func DecodeFragment(data []byte) (*Fragment, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("ppo: %w: %s", ErrFragment, fmt.Sprintf(format, a...))
	}
	hdr, body, reason := openSealed(data, fragMagic, "a rollout fragment")
	if reason != "" {
		return nil, bad("%s", reason)
	}
	f := &Fragment{}
	if err := json.Unmarshal(hdr, f); err != nil {
		return nil, bad("header: %v", err)
	}
	p := 0
	// Sizes first (int64: no overflow for in-range fields), then allocate.
	if f.NumEnvs < 1 || f.NumEnvs > maxFragEnvs || f.NumSteps < 1 || f.NumSteps > maxSteps ||
		f.ObsDim < 1 || f.ObsDim > maxFragDim || f.ActDim < 1 || f.ActDim > maxFragDim || f.MaskDim < 0 || f.MaskDim > maxFragDim {
		return nil, bad("sizes %d envs × %d steps, obs %d, act %d out of range", f.NumEnvs, f.NumSteps, f.ObsDim, f.ActDim)
	}
	tn := int64(f.NumSteps) * int64(f.NumEnvs)
	if tn*int64(max(f.ObsDim, f.ActDim, f.MaskDim)) > maxRollout {
		return nil, bad("%d steps × %d envs × %d values is too large", f.NumSteps, f.NumEnvs, max(f.ObsDim, f.ActDim, f.MaskDim))
	}
	want := 8*(tn*int64(f.ObsDim+f.ActDim+3)+int64(f.NumEnvs)) + 2*((tn+7)/8) + (tn*int64(f.MaskDim)+7)/8
	if int64(len(body)-p) != want {
		return nil, bad("%d bytes of data, the header implies %d", len(body)-p, want)
	}
	floats := func(n int64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(body[p:]))
			p += 8
		}
		return out
	}
	f.Obs = floats(tn * int64(f.ObsDim))
	f.Actions = floats(tn * int64(f.ActDim))
	f.LogProbs, f.Values, f.Rewards = floats(tn), floats(tn), floats(tn)
	f.NextValues = floats(int64(f.NumEnvs))
	bits := func(n int64) []bool {
		out := make([]bool, n)
		for i := range out {
			out[i] = body[p+i/8]&(1<<(i%8)) != 0
		}
		p += int((n + 7) / 8)
		return out
	}
	f.Terminated, f.Truncated = bits(tn), bits(tn)
	if f.MaskDim > 0 {
		f.Mask = bits(tn * int64(f.MaskDim))
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	return f, nil
}

// Info summarises f for metrics.
func (f *Fragment) Info() RolloutInfo {
	steps := f.NumSteps * f.NumEnvs
	sps := 0.0
	if f.RolloutSeconds > 0 {
		sps = float64(steps) / f.RolloutSeconds
	}
	return RolloutInfo{Worker: f.Worker, Node: f.Node, WeightVersion: f.WeightVersion, Steps: steps,
		Episodes: len(f.EpisodeReturns), StepsPerSecond: sps}
}
