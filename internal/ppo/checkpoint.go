package ppo

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Snapshotter is what a VecEnv implements when its whole state can be saved
// and restored (native.New's envs do). A checkpoint of a learner on such an
// env resumes bit for bit; on another env the instances restart episodes.
type Snapshotter interface {
	Snapshot() ([]byte, error)
	RestoreSnapshot(b []byte) error
}

// Checkpoint format, version 1 (little-endian; learner.Seal frames it):
//
//	magic   "TYPPOCKP"
//	version uint32
//	hdrLen  uint32, then hdrLen bytes of JSON (checkpointHeader)
//	params, Adam m, Adam v: each NumParams float64 values
//	sha256 of everything above
//
// JSON holds the small state; Go's encoder writes the shortest decimal that
// parses back to the same float64 (or float32), so it round-trips exactly.
const (
	ckptMagic   = "TYPPOCKP"
	ckptVersion = 1
)

// ErrCheckpoint marks a checkpoint that is corrupt, of an unknown version,
// or for a different environment (every learner's: learner.ErrCheckpoint).
var ErrCheckpoint = learner.ErrCheckpoint

type checkpointHeader struct {
	Config      Config         `json:"config"`
	Env         string         `json:"env"`
	NumEnvs     int            `json:"num_envs"`
	ObsDim      int            `json:"obs_dim"`
	ActDim      int            `json:"act_dim"`
	Iteration   int64          `json:"iteration"`
	Timesteps   int64          `json:"timesteps"`
	NumParams   int            `json:"num_params"`
	AdamStep    int64          `json:"adam_step"`
	RNG         []byte         `json:"rng"`
	ObsRMS      runningMeanStd `json:"obs_rms"`
	RetRMS      runningMeanStd `json:"ret_rms"`
	Ret         []float64      `json:"discounted_return"`
	Obs         []float32      `json:"obs"`
	EpRet       []float64      `json:"episode_return"`
	EpLen       []int64        `json:"episode_length"`
	Recent      []float64      `json:"recent_returns"`
	RecentNext  int            `json:"recent_next"`
	RecentN     int            `json:"recent_n"`
	EnvSnapshot []byte         `json:"env_snapshot,omitempty"`
}

// Save writes the learner's whole state: hyper-parameters, weights, Adam
// moments and step, observation and reward statistics, counters, the RNG,
// in-progress episode bookkeeping, the current observations and, when the
// env is a Snapshotter, the env's state.
func (l *Learner) Save(w io.Writer) error {
	rng, err := l.pcg.MarshalBinary()
	if err != nil {
		return fmt.Errorf("ppo: save: rng: %w", err)
	}
	h := checkpointHeader{
		Config: l.cfg, Env: l.spec.Name, NumEnvs: l.nEnv, ObsDim: l.od, ActDim: l.ad,
		Iteration: l.iteration, Timesteps: l.timesteps,
		NumParams: len(l.params), AdamStep: l.adam.Step, RNG: rng,
		ObsRMS: l.obsRMS, RetRMS: l.retRMS, Ret: l.ret, Obs: l.obs,
		EpRet: l.epRet, EpLen: l.epLen,
		Recent: l.recent.buf, RecentNext: l.recent.next, RecentN: l.recent.n,
	}
	if s, ok := l.env.(Snapshotter); ok {
		if h.EnvSnapshot, err = s.Snapshot(); err != nil {
			return fmt.Errorf("ppo: save: env %s: %w", l.spec.Name, err)
		}
	}
	hdr, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("ppo: save: header: %w", err)
	}
	payload := make([]byte, 0, 3*8*len(l.params))
	for _, vec := range [][]float64{l.params, l.adam.M, l.adam.V} {
		for _, v := range vec {
			payload = binary.LittleEndian.AppendUint64(payload, math.Float64bits(v))
		}
	}
	if _, err := w.Write(learner.Seal(ckptMagic, ckptVersion, hdr, payload)); err != nil {
		return fmt.Errorf("ppo: save: %w", err)
	}
	return nil
}

// Restore reads a checkpoint written by Save and returns a learner on env
// that continues the run: with a Snapshotter env (same name and size) the
// next Iterate is exactly what the saved learner's next Iterate would have
// been. Without an env snapshot, env is reset with a seed derived from the
// config seed and the timestep counter, and unfinished episodes are
// dropped. Counters continue from the checkpoint.
func Restore(r io.Reader, env envs.VecEnv) (*Learner, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("ppo: restore: read: %w", err)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("ppo: restore: %w: %s", ErrCheckpoint, fmt.Sprintf(format, a...))
	}
	hdr, body, err := learner.Unseal(data, ckptMagic, ckptVersion, "PPO")
	if err != nil {
		return nil, fmt.Errorf("ppo: restore: %w", err)
	}
	var h checkpointHeader
	if err := json.Unmarshal(hdr, &h); err != nil {
		return nil, bad("header: %v", err)
	}
	p := 0
	spec := env.Spec()
	if h.Env != spec.Name || h.NumEnvs != env.NumEnvs() || h.ObsDim != spec.Observation.Dim() || h.ActDim != spec.Action.Dim() {
		return nil, bad("it is for %d × %s (obs %d, act %d), the env is %d × %s (obs %d, act %d)",
			h.NumEnvs, h.Env, h.ObsDim, h.ActDim, env.NumEnvs(), spec.Name, spec.Observation.Dim(), spec.Action.Dim())
	}
	// Check the sizes before build allocates anything the header asks for.
	if h.NumParams < 0 || len(body)-p != 3*8*h.NumParams {
		return nil, bad("%d parameters but %d bytes of weights", h.NumParams, len(body)-p)
	}
	if len(h.Obs) != h.NumEnvs*h.ObsDim {
		return nil, bad("per-env state has the wrong size")
	}
	l, err := build(env, h.Config)
	if err != nil {
		return nil, fmt.Errorf("ppo: restore: %w", err)
	}
	np := len(l.params)
	if h.NumParams != np {
		return nil, bad("%d parameters, the config implies %d", h.NumParams, np)
	}
	for _, vec := range [][]float64{l.params, l.adam.M, l.adam.V} {
		for i := range vec {
			vec[i] = math.Float64frombits(binary.LittleEndian.Uint64(body[p:]))
			p += 8
		}
	}
	n := l.nEnv
	switch {
	case len(h.ObsRMS.Mean) != l.od || len(h.ObsRMS.Var) != l.od || len(h.RetRMS.Mean) != 1 || len(h.RetRMS.Var) != 1:
		return nil, bad("normalisation statistics have the wrong size")
	case len(h.Ret) != n || len(h.Obs) != n*l.od || len(h.EpRet) != n || len(h.EpLen) != n:
		return nil, bad("per-env state has the wrong size")
	case !l.recent.restore(h.Recent, h.RecentNext, h.RecentN):
		return nil, bad("recent-returns window has the wrong size")
	case h.Iteration < 0 || h.Timesteps < 0:
		return nil, bad("negative counters")
	}
	if err := l.pcg.UnmarshalBinary(h.RNG); err != nil {
		return nil, bad("rng: %v", err)
	}
	l.adam.Step = h.AdamStep
	l.iteration, l.timesteps = h.Iteration, h.Timesteps
	l.obsRMS, l.retRMS = h.ObsRMS, h.RetRMS
	if s, ok := env.(Snapshotter); ok && len(h.EnvSnapshot) > 0 {
		if err := s.RestoreSnapshot(h.EnvSnapshot); err != nil {
			return nil, fmt.Errorf("ppo: restore: env %s: %w", spec.Name, err)
		}
		copy(l.ret, h.Ret)
		copy(l.obs, h.Obs)
		copy(l.epRet, h.EpRet)
		copy(l.epLen, h.EpLen)
		return l, nil
	}
	// The envs cannot be put back: start fresh episodes, seeded so that
	// repeated resumes of one run differ from its first reset.
	if err := env.Reset(h.Config.Seed^(uint64(h.Timesteps)*0x9E3779B97F4A7C15), l.obs); err != nil {
		return nil, fmt.Errorf("ppo: restore: reset %s: %w", spec.Name, err)
	}
	return l, nil
}
