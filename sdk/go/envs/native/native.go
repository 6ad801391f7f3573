// Package native batches the pure-Go reference environments (CartPole-v1,
// Pendulum-v1) as an envs.VecEnv, so a learner can train without a plugin
// runtime. Its seeding matches the WASM plugins built from the same
// packages: Reset(seed) seeds instance i with seed+i (wrapping uint64), and
// a finished instance resets itself from its own continuing random stream.
package native

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"

	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/pendulum"
)

// Snapshotter is implemented by a VecEnv whose whole state (every instance's
// physics, step counter and random stream) can be saved and restored, so a
// resumed training run sees exactly the environments it would have seen.
type Snapshotter interface {
	Snapshot() ([]byte, error)
	RestoreSnapshot(b []byte) error
}

// Names lists the environments New knows.
func Names() []string {
	n := make([]string, 0, len(registry))
	for k := range registry {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

var registry = map[string]func(n int) envs.VecEnv{
	cartpole.Name: func(n int) envs.VecEnv { return newVec[cartpoleInst](cartpole.Spec(), n) },
	pendulum.Name: func(n int) envs.VecEnv { return newVec[pendulumInst](pendulum.Spec(), n) },
}

// New returns n instances of the named environment ("CartPole-v1",
// "Pendulum-v1") as a VecEnv that also implements Snapshotter. Call Reset
// before Step.
func New(name string, n int) (envs.VecEnv, error) {
	mk, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("native env %q: unknown (have %v)", name, Names())
	}
	if n < 1 {
		return nil, fmt.Errorf("native env %s: n = %d, want ≥ 1", name, n)
	}
	return mk(n), nil
}

// inst is what one environment instance provides to the batch. Action
// validation is separate so a bad batch is rejected before any env moves.
type inst interface {
	Seed(seed uint64)
	Reset(obs []float32)
	step(action []float32, obs []float32) (float32, bool, bool)
	validAction(action []float32) bool
	MarshalBinary() ([]byte, error)
	UnmarshalBinary(b []byte) error
}

type cartpoleInst struct{ cartpole.Env }

func (c *cartpoleInst) step(a, obs []float32) (float32, bool, bool) {
	return c.Step(int(a[0]), obs)
}
func (c *cartpoleInst) validAction(a []float32) bool { return a[0] == 0 || a[0] == 1 }

type pendulumInst struct{ pendulum.Env }

func (p *pendulumInst) step(a, obs []float32) (float32, bool, bool) { return p.Step(a[0], obs) }
func (p *pendulumInst) validAction(a []float32) bool {
	return !math.IsNaN(float64(a[0]))
}

// vec is the batch. E is the instance value type; P its pointer, which
// implements inst (the generic form keeps the instances in one flat slice
// and lets the compiler devirtualise the per-step calls).
type vec[E any, P interface {
	*E
	inst
}] struct {
	spec   envs.Spec
	n      int
	od, ad int
	insts  []E
	reset  bool
	closed bool
}

func newVec[E any, P interface {
	*E
	inst
}](spec envs.Spec, n int) *vec[E, P] {
	return &vec[E, P]{spec: spec, n: n, od: spec.Observation.Dim(), ad: spec.Action.Dim(), insts: make([]E, n)}
}

func (v *vec[E, P]) Spec() envs.Spec { return v.spec }
func (v *vec[E, P]) NumEnvs() int    { return v.n }

// Reset seeds instance i with seed+i and writes every first observation.
func (v *vec[E, P]) Reset(seed uint64, obs []float32) error {
	if v.closed {
		return fmt.Errorf("native env %s: reset: closed", v.spec.Name)
	}
	if len(obs) != v.n*v.od {
		return fmt.Errorf("native env %s: reset: obs has %d values, want %d", v.spec.Name, len(obs), v.n*v.od)
	}
	od := v.od
	for i := range v.insts {
		p := P(&v.insts[i])
		p.Seed(seed + uint64(i))
		p.Reset(obs[i*od : (i+1)*od])
	}
	v.reset = true
	return nil
}

// Step steps every instance; a finished one writes its last observation to
// finalObs and resets itself. An invalid action (not 0/1 for a discrete
// env, NaN for a box env) rejects the whole batch before any env moves.
func (v *vec[E, P]) Step(actions, obs, rewards []float32, terminated, truncated []bool, finalObs []float32) error {
	if v.closed {
		return fmt.Errorf("native env %s: step: closed", v.spec.Name)
	}
	if !v.reset {
		return fmt.Errorf("native env %s: step before reset", v.spec.Name)
	}
	n, od, ad := v.n, v.od, v.ad
	if len(actions) != n*ad || len(obs) != n*od || len(rewards) != n || len(terminated) != n || len(truncated) != n || len(finalObs) != n*od {
		return fmt.Errorf("native env %s: step: buffer sizes (%d,%d,%d,%d,%d,%d) do not match n=%d obs_dim=%d act_dim=%d",
			v.spec.Name, len(actions), len(obs), len(rewards), len(terminated), len(truncated), len(finalObs), n, od, ad)
	}
	for i := range v.insts {
		if a := actions[i*ad : (i+1)*ad]; !P(&v.insts[i]).validAction(a) {
			return fmt.Errorf("native env %s: step: env %d: invalid action %v", v.spec.Name, i, a)
		}
	}
	for i := range v.insts {
		p := P(&v.insts[i])
		o := obs[i*od : (i+1)*od]
		r, term, trunc := p.step(actions[i*ad:(i+1)*ad], o)
		rewards[i], terminated[i], truncated[i] = r, term, trunc
		if term || trunc {
			copy(finalObs[i*od:(i+1)*od], o)
			p.Reset(o)
		}
	}
	return nil
}

func (v *vec[E, P]) Close() error {
	v.closed = true
	return nil
}

// Snapshot format: "TYNV", version byte, name length + name, uint32 n,
// then per instance uint32 length + the instance's MarshalBinary, and a
// trailing CRC-32 (IEEE) of everything before it. Little-endian.
const (
	snapMagic   = "TYNV"
	snapVersion = 1
)

// Snapshot encodes every instance's state.
func (v *vec[E, P]) Snapshot() ([]byte, error) {
	if !v.reset {
		return nil, fmt.Errorf("native env %s: snapshot before reset", v.spec.Name)
	}
	b := append([]byte(snapMagic), snapVersion, byte(len(v.spec.Name)))
	b = append(b, v.spec.Name...)
	b = binary.LittleEndian.AppendUint32(b, uint32(v.n))
	for i := range v.insts {
		s, err := P(&v.insts[i]).MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("native env %s: snapshot env %d: %w", v.spec.Name, i, err)
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b)), nil
}

var errSnapshot = errors.New("bad snapshot")

// RestoreSnapshot replaces every instance's state with a Snapshot's. The
// snapshot must come from the same environment with the same n; nothing
// changes if it is rejected.
func (v *vec[E, P]) RestoreSnapshot(b []byte) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("native env %s: restore: %w: %s", v.spec.Name, errSnapshot, fmt.Sprintf(format, a...))
	}
	if len(b) < len(snapMagic)+2+4+4 || string(b[:4]) != snapMagic {
		return fail("no %s header", snapMagic)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if got := crc32.ChecksumIEEE(body); got != sum {
		return fail("checksum %08x, want %08x", got, sum)
	}
	if body[4] != snapVersion {
		return fail("version %d, want %d", body[4], snapVersion)
	}
	nl := int(body[5])
	p := 6
	if len(body) < p+nl+4 {
		return fail("truncated")
	}
	if name := string(body[p : p+nl]); name != v.spec.Name {
		return fail("it is of %q", name)
	}
	p += nl
	if n := int(binary.LittleEndian.Uint32(body[p:])); n != v.n {
		return fail("it has %d envs, this has %d", n, v.n)
	}
	p += 4
	restored := make([]E, v.n)
	for i := range restored {
		if len(body) < p+4 {
			return fail("truncated at env %d", i)
		}
		l := int(binary.LittleEndian.Uint32(body[p:]))
		p += 4
		if len(body) < p+l {
			return fail("truncated at env %d", i)
		}
		if err := P(&restored[i]).UnmarshalBinary(body[p : p+l]); err != nil {
			return fail("env %d: %v", i, err)
		}
		p += l
	}
	if p != len(body) {
		return fail("%d trailing bytes", len(body)-p)
	}
	v.insts = restored
	v.reset = true
	return nil
}
