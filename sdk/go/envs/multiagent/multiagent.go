// Package multiagent batches single instances of a multi-agent game into
// an envs.VecEnv whose slots are agents (envs.Spec.MultiAgent): the native
// form a learner trains on and the form a plugin registers as its VecEnv
// (plugin.RegisterVecEnv), so a plugin built on a game steps bit-identically
// to the native batch.
package multiagent

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Env is one instance of a multi-agent game. Buffers hold every agent's
// values in agent order: obs has len(Agents)·Observation.Dim() values,
// actions len(Agents)·Action.Dim(), rewards and done one per agent.
type Env interface {
	// Seed reseeds the instance's random source.
	Seed(seed uint64)
	// Reset starts an episode and writes every agent's first observation.
	Reset(obs []float32)
	// Step applies every live agent's action (a finished agent's is to be
	// ignored), writes every agent's next observation, reward and whether
	// its episode ended (terminated) this step. A finished agent is asked
	// again until all are done; its reward then counts for nothing.
	Step(actions, obs, rewards []float32, terminated []bool)
	// ValidAction reports whether one agent's action is in the space.
	ValidAction(action []float32) bool
	MarshalBinary() ([]byte, error)
	UnmarshalBinary(b []byte) error
}

// Batch is n instances of one game as a VecEnv of n·len(Agents) slots.
type Batch struct {
	spec         envs.Spec
	envs         []Env
	na, od, ad   int
	steps        []int
	done         []bool // per slot: finished this episode, waiting for the others
	obs, rew     []float32
	term         []bool
	instanceSeed uint64
}

var _ envs.VecEnv = (*Batch)(nil)

// New batches slots/len(spec.Agents) instances made by newEnv.
func New(spec envs.Spec, slots int, newEnv func() Env) (*Batch, error) {
	na := len(spec.Agents)
	if na == 0 {
		return nil, fmt.Errorf("multiagent %s: the spec names no agents", spec.Name)
	}
	if slots < na || slots%na != 0 {
		return nil, fmt.Errorf("multiagent %s: %d slots is not a whole number of instances of %d agents", spec.Name, slots, na)
	}
	n := slots / na
	b := &Batch{spec: spec, envs: make([]Env, n), na: na, od: spec.Observation.Dim(), ad: spec.Action.Dim(),
		steps: make([]int, n), done: make([]bool, slots)}
	for i := range b.envs {
		b.envs[i] = newEnv()
	}
	b.obs, b.rew, b.term = make([]float32, na*b.od), make([]float32, na), make([]bool, na)
	return b, nil
}

func (b *Batch) Spec() envs.Spec { return b.spec }
func (b *Batch) NumEnvs() int    { return len(b.done) }
func (b *Batch) Close() error    { return nil }

// Reset seeds instance i with seed+i and starts every episode.
func (b *Batch) Reset(seed uint64, obs []float32) error {
	if len(obs) != len(b.done)*b.od {
		return fmt.Errorf("multiagent %s: reset: obs has %d values, want %d", b.spec.Name, len(obs), len(b.done)*b.od)
	}
	w := b.na * b.od
	for i, e := range b.envs {
		e.Seed(seed + uint64(i))
		e.Reset(obs[i*w : (i+1)*w])
		b.steps[i] = 0
	}
	clear(b.done)
	return nil
}

// Step steps every instance; see envs.Spec.MultiAgent for the slots'
// semantics. An instance whose agents are all done, or that reached
// MaxEpisodeSteps (every live agent truncated), resets itself.
func (b *Batch) Step(actions, obs, rewards []float32, terminated, truncated []bool, finalObs []float32) error {
	slots := len(b.done)
	if len(actions) != slots*b.ad || len(obs) != slots*b.od || len(rewards) != slots ||
		len(terminated) != slots || len(truncated) != slots || len(finalObs) != slots*b.od {
		return fmt.Errorf("multiagent %s: step: buffer sizes do not match %d slots", b.spec.Name, slots)
	}
	for k := 0; k < slots; k++ {
		if !b.done[k] && !b.envs[k/b.na].ValidAction(actions[k*b.ad:(k+1)*b.ad]) {
			return fmt.Errorf("multiagent %s: step: %w: slot %d (agent %s): %v", b.spec.Name, ErrAction, k, b.spec.Agents[k%b.na], actions[k*b.ad:(k+1)*b.ad])
		}
	}
	na, od, ad := b.na, b.od, b.ad
	for i, e := range b.envs {
		lo := i * na
		e.Step(actions[lo*ad:(lo+na)*ad], b.obs, b.rew, b.term)
		b.steps[i]++
		limit := b.spec.MaxEpisodeSteps > 0 && b.steps[i] >= b.spec.MaxEpisodeSteps
		copy(obs[lo*od:(lo+na)*od], b.obs)
		for a := 0; a < na; a++ {
			k := lo + a
			rewards[k], terminated[k], truncated[k] = 0, false, false
			if b.done[k] {
				continue
			}
			rewards[k] = b.rew[a]
			terminated[k] = b.term[a]
			truncated[k] = limit && !b.term[a]
			if terminated[k] || truncated[k] {
				b.done[k] = true
				copy(finalObs[k*od:(k+1)*od], b.obs[a*od:(a+1)*od])
			}
		}
		all := true
		for a := 0; a < na && all; a++ {
			all = b.done[lo+a]
		}
		if all {
			e.Reset(obs[lo*od : (lo+na)*od])
			b.steps[i] = 0
			clear(b.done[lo : lo+na])
		}
	}
	return nil
}

// ErrAction marks an action outside the action space.
var ErrAction = errors.New("action outside the action space")

// Snapshot saves every instance, its step count and its agents' done flags.
func (b *Batch) Snapshot() ([]byte, error) {
	var out []byte
	for i, e := range b.envs {
		st, err := e.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("multiagent %s: snapshot instance %d: %w", b.spec.Name, i, err)
		}
		out = binary.LittleEndian.AppendUint64(out, uint64(b.steps[i]))
		for _, d := range b.done[i*b.na : (i+1)*b.na] {
			out = append(out, boolByte(d))
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(len(st)))
		out = append(out, st...)
	}
	return out, nil
}

// RestoreSnapshot puts back a Snapshot of as many instances.
func (b *Batch) RestoreSnapshot(p []byte) error {
	for i, e := range b.envs {
		if len(p) < 12+b.na {
			return fmt.Errorf("multiagent %s: snapshot ends before instance %d", b.spec.Name, i)
		}
		steps := binary.LittleEndian.Uint64(p)
		p = p[8:]
		for a := range b.na {
			b.done[i*b.na+a] = p[a] != 0
		}
		p = p[b.na:]
		n := int(binary.LittleEndian.Uint32(p))
		p = p[4:]
		if n > len(p) {
			return fmt.Errorf("multiagent %s: instance %d's state needs %d bytes, %d left", b.spec.Name, i, n, len(p))
		}
		if err := e.UnmarshalBinary(p[:n]); err != nil {
			return fmt.Errorf("multiagent %s: instance %d: %w", b.spec.Name, i, err)
		}
		b.steps[i] = int(steps)
		p = p[n:]
	}
	if len(p) != 0 {
		return fmt.Errorf("multiagent %s: %d bytes after the last instance", b.spec.Name, len(p))
	}
	return nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
