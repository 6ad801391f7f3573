package pluginhost

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

// VecEnv is an env plugin instance batch seen as an envs.VecEnv. It holds
// one sandboxed instance whose step_batch steps all N environments per call.
// Buffers live in guest memory; the host copies actions in and results out
// in bulk. Not safe for concurrent use (like any VecEnv).
//
// If a call fails (deadline, trap, out of memory, fault) the instance is
// discarded; the error names the plugin and call, and the next Reset starts
// on a fresh instance.
type VecEnv struct {
	m      *Module
	ctx    context.Context
	in     *instance
	n      int
	seed   uint64
	spec   envs.Spec
	od, ad int

	actions, obs, rewards, term, trunc, finalObs uint32
	closed                                       bool
	stats                                        StepStats
}

// StepStats sums a VecEnv's step_batch calls since it was last taken: the
// basis of one span per training iteration (a span per call would cost
// more than many calls).
type StepStats struct {
	Calls       int
	EnvSteps    int64
	Busy        time.Duration // wall time inside Step, host copies included
	First, Last time.Time     // start of the first call, end of the last
}

// TakeStepStats returns the stats since the previous call and resets them.
func (v *VecEnv) TakeStepStats() StepStats {
	st := v.stats
	v.stats = StepStats{}
	return st
}

var _ envs.VecEnv = (*VecEnv)(nil)

// Slots is how many VecEnv slots instances instances of the env take: one
// per agent of a multi-agent env, else one each.
func (m Metadata) Slots(instances int) int { return instances * max(1, len(m.Agents)) }

// NewVecEnv instantiates (or takes from the pool) an instance and inits it
// with n environments. ctx bounds every later call (checked between calls;
// each call has the module's CallTimeout).
func (m *Module) NewVecEnv(ctx context.Context, n int, seed uint64) (*VecEnv, error) {
	if m.meta.Kind != KindEnv {
		return nil, fmt.Errorf("plugin %s: NewVecEnv: kind is %q, not env", m.label, m.meta.Kind)
	}
	if n < 1 || n > m.limits.MaxEnvs {
		return nil, fmt.Errorf("plugin %s: NewVecEnv: n = %d outside [1,%d]", m.label, n, m.limits.MaxEnvs)
	}
	if a := len(m.meta.Agents); a > 0 && n%a != 0 {
		return nil, fmt.Errorf("plugin %s: NewVecEnv: n = %d slots is not a whole number of instances of %d agents", m.label, n, a)
	}
	v := &VecEnv{m: m, ctx: ctx, n: n, seed: seed, spec: m.meta.Spec(), od: m.meta.Observation.Dim(), ad: m.meta.Action.Dim()}
	if err := v.start(); err != nil {
		return nil, err
	}
	return v, nil
}

// start acquires an instance, inits it and allocates the batch buffers.
func (v *VecEnv) start() error {
	in, err := v.m.acquire(v.ctx)
	if err != nil {
		return err
	}
	in.stack[0], in.stack[1] = uint64(v.n), v.seed
	if err := in.callStatus(v.ctx, fnInit, 2, v.m.limits.InitTimeout); err != nil {
		v.m.release(in)
		return err
	}
	// Buffers stay with the instance across pooled reuse and are only
	// replaced (and freed) when a larger batch needs more room.
	n, od, ad := v.n, v.od, v.ad
	if b := in.envBufs; b != nil && b.n < n {
		n = max(n, min(2*b.n, v.m.limits.MaxEnvs)) // grow geometrically
	}
	if b := in.envBufs; b == nil || b.n < n || b.od != od || b.ad != ad {
		if b != nil {
			in.envBufs = nil
			if err := in.free(v.ctx, b.ptrs[:]...); err != nil {
				v.m.release(in)
				return err
			}
		}
		b = &envBufs{n: n, od: od, ad: ad}
		sizes := []int{4 * n * ad, 4 * n * od, 4 * n, n, n, 4 * n * od}
		for i, size := range sizes {
			p, err := in.alloc(v.ctx, size)
			if err != nil {
				v.m.release(in)
				return err
			}
			b.ptrs[i] = p
		}
		in.envBufs = b
	}
	p := in.envBufs.ptrs
	v.actions, v.obs, v.rewards, v.term, v.trunc, v.finalObs = p[0], p[1], p[2], p[3], p[4], p[5]
	v.in = in
	return nil
}

// drop discards a failed instance.
func (v *VecEnv) drop() {
	if v.in != nil {
		v.m.release(v.in)
		v.in = nil
	}
}

func (v *VecEnv) Spec() envs.Spec { return v.spec }
func (v *VecEnv) NumEnvs() int    { return v.n }

// Reset seeds environment i with seed+i and writes first observations.
func (v *VecEnv) Reset(seed uint64, obs []float32) error {
	if v.closed {
		return fmt.Errorf("plugin %s: reset: env %w", v.m.label, ErrClosed)
	}
	if len(obs) != v.n*v.od {
		return fmt.Errorf("plugin %s: reset: obs has %d values, want %d", v.m.label, len(obs), v.n*v.od)
	}
	if v.in == nil {
		if err := v.start(); err != nil {
			return err
		}
	}
	in := v.in
	in.stack[0], in.stack[1] = seed, uint64(v.obs)
	if err := in.callStatus(v.ctx, fnReset, 2, v.m.limits.CallTimeout); err != nil {
		if in.broken {
			v.drop()
		}
		return err
	}
	copy(obs, in.f32At(v.obs, v.n*v.od))
	return nil
}

// Step steps all environments; see envs.VecEnv.
func (v *VecEnv) Step(actions, obs, rewards []float32, terminated, truncated []bool, finalObs []float32) error {
	if v.closed {
		return fmt.Errorf("plugin %s: step_batch: env %w", v.m.label, ErrClosed)
	}
	if v.in == nil {
		return fmt.Errorf("plugin %s: step_batch: the instance was discarded after a failure; call Reset", v.m.label)
	}
	n := v.n
	start := time.Now()
	defer func() {
		end := time.Now()
		if v.stats.Calls == 0 {
			v.stats.First = start
		}
		v.stats.Calls++
		v.stats.EnvSteps += int64(n)
		v.stats.Busy += end.Sub(start)
		v.stats.Last = end
	}()
	if len(actions) != n*v.ad || len(obs) != n*v.od || len(rewards) != n || len(terminated) != n || len(truncated) != n || len(finalObs) != n*v.od {
		return fmt.Errorf("plugin %s: step_batch: buffer sizes (%d,%d,%d,%d,%d,%d) do not match n=%d obs_dim=%d act_dim=%d",
			v.m.label, len(actions), len(obs), len(rewards), len(terminated), len(truncated), len(finalObs), n, v.od, v.ad)
	}
	in := v.in
	copy(in.f32At(v.actions, n*v.ad), actions)
	s := &in.stack
	s[0], s[1], s[2], s[3], s[4], s[5], s[6] = uint64(n), uint64(v.actions), uint64(v.obs), uint64(v.rewards), uint64(v.term), uint64(v.trunc), uint64(v.finalObs)
	if err := in.callStatus(v.ctx, fnStepBatch, 7, v.m.limits.CallTimeout); err != nil {
		if in.broken {
			v.drop()
		}
		return err
	}
	// Views are re-taken after the call: the guest may have grown memory.
	copy(obs, in.f32At(v.obs, n*v.od))
	copy(rewards, in.f32At(v.rewards, n))
	for i, b := range in.bytesAt(v.term, n) {
		terminated[i] = b != 0
	}
	for i, b := range in.bytesAt(v.trunc, n) {
		truncated[i] = b != 0
	}
	fo := in.f32At(v.finalObs, n*v.od)
	for i := 0; i < n; i++ {
		if terminated[i] || truncated[i] {
			copy(finalObs[i*v.od:(i+1)*v.od], fo[i*v.od:(i+1)*v.od])
		}
	}
	return nil
}

// Snapshot returns the envs' whole state when the plugin can save it (its
// optional env_save export; the Go SDK's does when every env implements
// encoding.BinaryMarshaler), so a checkpoint resumes episodes bit for bit
// (ppo.Snapshotter). A plugin that cannot answers nil: the checkpoint then
// holds no env state and a resumed run starts fresh episodes.
func (v *VecEnv) Snapshot() ([]byte, error) {
	if v.closed {
		return nil, fmt.Errorf("plugin %s: env_save: env %w", v.m.label, ErrClosed)
	}
	if v.in == nil {
		return nil, nil // discarded after a failure: its state is gone, a restore resets
	}
	in := v.in
	if in.fns[fnEnvSave] == nil || in.fns[fnEnvRestore] == nil {
		return nil, nil
	}
	for capacity := 64 << 10; ; {
		buf, err := in.alloc(v.ctx, capacity+8)
		if err != nil {
			return nil, v.failed(err)
		}
		out := buf + uint32(capacity)
		in.stack[0], in.stack[1], in.stack[2] = uint64(buf), uint64(capacity), uint64(out)
		err = in.callStatus(v.ctx, fnEnvSave, 3, v.m.limits.CallTimeout)
		n := int(binary.LittleEndian.Uint32(in.bytesAt(out, 4)))
		var state []byte
		if err == nil && n <= capacity {
			state = append([]byte(nil), in.bytesAt(buf, n)...)
		}
		if ferr := in.free(v.ctx, buf); ferr != nil {
			return nil, v.failed(ferr)
		}
		switch {
		case err == nil && n <= capacity:
			return state, nil
		case err == nil:
			in.broken = true
			return nil, v.failed(&CallError{Plugin: in.label, Call: "env_save", Err: fmt.Errorf("%w: reported %d bytes, buffer holds %d", ErrProtocol, n, capacity)})
		case errors.Is(err, ErrBadInput) && n > capacity && n <= v.m.limits.MaxStateBytes:
			capacity = n // too small a buffer: once more with room
		case errors.Is(err, ErrBadInput) && n > capacity:
			return nil, fmt.Errorf("plugin %s: env_save: state of %d bytes exceeds the %d-byte limit", v.m.label, n, v.m.limits.MaxStateBytes)
		case errors.Is(err, ErrBadInput):
			return nil, nil // this env cannot save its state
		default:
			return nil, v.failed(err)
		}
	}
}

// RestoreSnapshot puts back a state from Snapshot (of as many envs of the
// same plugin).
func (v *VecEnv) RestoreSnapshot(state []byte) error {
	if v.closed {
		return fmt.Errorf("plugin %s: env_restore: env %w", v.m.label, ErrClosed)
	}
	if v.in == nil {
		if err := v.start(); err != nil {
			return err
		}
	}
	in := v.in
	if in.fns[fnEnvRestore] == nil {
		return fmt.Errorf("plugin %s: env_restore: %w: env_restore", v.m.label, ErrMissingExport)
	}
	if len(state) > v.m.limits.MaxStateBytes {
		return fmt.Errorf("plugin %s: env_restore: state of %d bytes exceeds the %d-byte limit", v.m.label, len(state), v.m.limits.MaxStateBytes)
	}
	buf, err := in.alloc(v.ctx, max(len(state), 8))
	if err != nil {
		return v.failed(err)
	}
	copy(in.bytesAt(buf, len(state)), state)
	in.stack[0], in.stack[1] = uint64(buf), uint64(len(state))
	err = in.callStatus(v.ctx, fnEnvRestore, 2, v.m.limits.CallTimeout)
	if in.broken {
		return v.failed(err)
	}
	// Freed on a refusal too: a refused state must not leak guest memory.
	if ferr := in.free(v.ctx, buf); ferr != nil {
		return v.failed(ferr)
	}
	return err
}

// failed drops a broken instance and passes err on.
func (v *VecEnv) failed(err error) error {
	if err != nil && v.in != nil && v.in.broken {
		v.drop()
	}
	return err
}

// Close returns the instance to the module's pool.
func (v *VecEnv) Close() error {
	if v.closed {
		return nil
	}
	v.closed = true
	v.drop()
	return nil
}

// envBufs are an env instance's batch buffers in guest memory.
type envBufs struct {
	n, od, ad int
	ptrs      [6]uint32 // actions, obs, rewards, terminated, truncated, final_obs
}
