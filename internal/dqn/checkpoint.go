package dqn

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/envs/native"
)

// Checkpoint format, version 1: learner.Seal's envelope (magic
// "TYDQNCKP", a JSON checkpointHeader) around, little-endian:
//
//	params, target params, Adam m, Adam v: each NumParams float64 values
//	replay: obs and next (Size × ObsDim float32 each), actions (Size
//	int32), rewards (Size float32), terminal flags (Size bytes)
//
// The replay buffer is in it, so a resumed run samples exactly the
// minibatches the first would have.
const (
	ckptMagic   = "TYDQNCKP"
	ckptVersion = 1
)

// ErrCheckpoint marks a checkpoint that is corrupt, of an unknown version,
// or for a different environment (every learner's: learner.ErrCheckpoint).
var ErrCheckpoint = learner.ErrCheckpoint

type checkpointHeader struct {
	Config     Config    `json:"config"`
	Env        string    `json:"env"`
	NumEnvs    int       `json:"num_envs"`
	ObsDim     int       `json:"obs_dim"`
	Actions    int       `json:"actions"`
	Iteration  int64     `json:"iteration"`
	Timesteps  int64     `json:"timesteps"`
	GradSteps  int64     `json:"gradient_steps"`
	SinceTrain int64     `json:"since_train"`
	NumParams  int       `json:"num_params"`
	AdamStep   int64     `json:"adam_step"`
	RNG        []byte    `json:"rng"`
	Obs        []float32 `json:"obs"`
	EpRet      []float64 `json:"episode_return"`
	EpLen      []int64   `json:"episode_length"`
	Recent     []float64 `json:"recent_returns"`
	RecentNext int       `json:"recent_next"`
	RecentN    int       `json:"recent_n"`
	// Eval is the latest evaluation (Episodes 0: none; its bounds are
	// then 0, so JSON holds it).
	Eval        learner.EvalResult `json:"eval"`
	ReplaySize  int                `json:"replay_size"`
	ReplayPos   int                `json:"replay_pos"`
	EnvSnapshot []byte             `json:"env_snapshot,omitempty"`
}

// Save writes the learner's whole state: config, both networks, Adam, the
// RNG, counters, the replay buffer, in-progress episodes, the current
// observations, the latest evaluation and, when the env is a
// native.Snapshotter, the env's state.
func (l *Learner) Save(w io.Writer) error {
	rng, err := l.pcg.MarshalBinary()
	if err != nil {
		return fmt.Errorf("dqn: save: rng: %w", err)
	}
	h := checkpointHeader{
		Config: l.cfg, Env: l.spec.Name, NumEnvs: l.nEnv, ObsDim: l.od, Actions: l.nAct,
		Iteration: l.iteration, Timesteps: l.timesteps, GradSteps: l.gradSteps, SinceTrain: l.sinceTrain,
		NumParams: len(l.params), AdamStep: l.adam.Step, RNG: rng,
		Obs: l.obs, EpRet: l.epRet, EpLen: l.epLen,
		Recent: l.recent, RecentNext: l.recentNext, RecentN: l.recentN,
		ReplaySize: l.buf.len(), ReplayPos: l.buf.pos, Eval: l.eval,
	}
	if s, ok := l.env.(native.Snapshotter); ok {
		if h.EnvSnapshot, err = s.Snapshot(); err != nil {
			return fmt.Errorf("dqn: save: env %s: %w", l.spec.Name, err)
		}
	}
	hdr, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("dqn: save: header: %w", err)
	}
	out := make([]byte, 0, 4*8*len(l.params)+l.buf.len()*(8*l.od+9))
	for _, vec := range [][]float64{l.params, l.target, l.adam.M, l.adam.V} {
		for _, v := range vec {
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
		}
	}
	for _, vec := range [][]float32{l.buf.obs, l.buf.next} {
		for _, v := range vec {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	for _, a := range l.buf.act {
		out = binary.LittleEndian.AppendUint32(out, uint32(a))
	}
	for _, v := range l.buf.rew {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
	}
	for _, t := range l.buf.term {
		out = append(out, boolByte(t))
	}
	if _, err := w.Write(learner.Seal(ckptMagic, ckptVersion, hdr, out)); err != nil {
		return fmt.Errorf("dqn: save: %w", err)
	}
	return nil
}

func boolByte(t bool) byte {
	if t {
		return 1
	}
	return 0
}

// Restore reads a checkpoint Save wrote and returns a learner on env that
// continues the run: with a native.Snapshotter env (same name and size)
// the next Iterate is exactly what the saved learner's would have been;
// on another env the instances start fresh episodes (reset with a seed of
// the config's seed and the timestep counter). open is as for New.
func Restore(r io.Reader, env envs.VecEnv, open func(context.Context, int, uint64) (envs.VecEnv, error)) (*Learner, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("dqn: restore: read: %w", err)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("dqn: restore: %w: %s", ErrCheckpoint, fmt.Sprintf(format, a...))
	}
	hdr, body, err := learner.Unseal(data, ckptMagic, ckptVersion, "DQN")
	if err != nil {
		return nil, fmt.Errorf("dqn: restore: %w", err)
	}
	var h checkpointHeader
	if err := json.Unmarshal(hdr, &h); err != nil {
		return nil, bad("header: %v", err)
	}
	p := 0
	spec := env.Spec()
	if h.Env != spec.Name || h.NumEnvs != env.NumEnvs() || h.ObsDim != spec.Observation.Dim() || h.Actions != spec.Action.N {
		return nil, bad("it is for %d × %s (obs %d, %d actions), the env is %d × %s (obs %d, %d actions)",
			h.NumEnvs, h.Env, h.ObsDim, h.Actions, env.NumEnvs(), spec.Name, spec.Observation.Dim(), spec.Action.N)
	}
	// Check every size before build allocates anything the header asks for.
	if err := h.Config.Validate(); err != nil {
		return nil, bad("config: %v", err)
	}
	rs := h.ReplaySize
	if rs < 0 || rs > h.Config.BufferSize || h.ReplayPos < 0 || (h.ReplayPos > 0 && h.ReplayPos >= rs) || (rs < h.Config.BufferSize && h.ReplayPos != 0) {
		return nil, bad("replay buffer of %d (at %d) for a capacity of %d", rs, h.ReplayPos, h.Config.BufferSize)
	}
	if h.NumParams < 0 || h.NumParams > len(body) || len(body)-p != 4*8*h.NumParams+rs*(8*h.ObsDim+9) {
		return nil, bad("%d parameters and %d transitions but %d bytes of arrays", h.NumParams, rs, len(body)-p)
	}
	if len(h.Obs) != h.NumEnvs*h.ObsDim || len(h.EpRet) != h.NumEnvs || len(h.EpLen) != h.NumEnvs {
		return nil, bad("per-env state has the wrong size")
	}
	l, err := build(env, open, h.Config)
	if err != nil {
		return nil, fmt.Errorf("dqn: restore: %w", err)
	}
	if h.NumParams != len(l.params) {
		return nil, bad("%d parameters, the config implies %d", h.NumParams, len(l.params))
	}
	switch {
	case len(h.Recent) != len(l.recent) || h.RecentNext < 0 || h.RecentNext >= len(l.recent) || h.RecentN < 0 || h.RecentN > len(l.recent):
		return nil, bad("recent-returns window has the wrong size")
	case h.Iteration < 0 || h.Timesteps < 0 || h.GradSteps < 0 || h.SinceTrain < 0 || h.Eval.Episodes < 0:
		return nil, bad("negative counters")
	}
	if err := l.pcg.UnmarshalBinary(h.RNG); err != nil {
		return nil, bad("rng: %v", err)
	}
	f64 := func(vec []float64) {
		for i := range vec {
			vec[i] = math.Float64frombits(binary.LittleEndian.Uint64(body[p:]))
			p += 8
		}
	}
	f32 := func(vec []float32) {
		for i := range vec {
			vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(body[p:]))
			p += 4
		}
	}
	for _, vec := range [][]float64{l.params, l.target, l.adam.M, l.adam.V} {
		f64(vec)
	}
	od := l.od
	b := &l.buf
	b.obs, b.next = make([]float32, rs*od), make([]float32, rs*od)
	b.act, b.rew, b.term = make([]int32, rs), make([]float32, rs), make([]bool, rs)
	f32(b.obs)
	f32(b.next)
	for i := range b.act {
		a := int32(binary.LittleEndian.Uint32(body[p:]))
		if a < 0 || int(a) >= l.nAct {
			return nil, bad("transition %d has action %d of %d", i, a, l.nAct)
		}
		b.act[i] = a
		p += 4
	}
	f32(b.rew)
	for i := range b.term {
		b.term[i] = body[p] != 0
		p++
	}
	b.pos = h.ReplayPos
	l.adam.Step = h.AdamStep
	l.iteration, l.timesteps, l.gradSteps, l.sinceTrain = h.Iteration, h.Timesteps, h.GradSteps, h.SinceTrain
	copy(l.recent, h.Recent)
	l.recentNext, l.recentN = h.RecentNext, h.RecentN
	l.eval = h.Eval

	if s, ok := env.(native.Snapshotter); ok && len(h.EnvSnapshot) > 0 {
		if err := s.RestoreSnapshot(h.EnvSnapshot); err != nil {
			return nil, fmt.Errorf("dqn: restore: env %s: %w", spec.Name, err)
		}
		copy(l.obs, h.Obs)
		copy(l.epRet, h.EpRet)
		copy(l.epLen, h.EpLen)
		return l, nil
	}
	// The envs cannot be put back: start fresh episodes, seeded so that
	// repeated resumes of one run differ from its first reset.
	if err := env.Reset(h.Config.Seed^(uint64(h.Timesteps)*0x9E3779B97F4A7C15), l.obs); err != nil {
		return nil, fmt.Errorf("dqn: restore: reset %s: %w", spec.Name, err)
	}
	return l, nil
}
