package multiagent

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

// race is a game whose agent a finishes after a+1 steps.
type race struct{ t int }

func (r *race) Seed(uint64)         {}
func (r *race) Reset(obs []float32) { r.t = 0; r.observe(obs) }
func (r *race) Step(actions, obs, rewards []float32, terminated []bool) {
	r.t++
	for a := range rewards {
		rewards[a] = 1
		terminated[a] = r.t >= a+1
	}
	r.observe(obs)
}
func (r *race) observe(obs []float32) {
	for i := range obs {
		obs[i] = float32(r.t)
	}
}
func (r *race) ValidAction(a []float32) bool { return a[0] == 0 }
func (r *race) MarshalBinary() ([]byte, error) {
	return []byte{byte(r.t)}, nil
}
func (r *race) UnmarshalBinary(b []byte) error {
	if len(b) != 1 {
		return fmt.Errorf("bad state")
	}
	r.t = int(b[0])
	return nil
}

var raceSpec = envs.Spec{Name: "race", Observation: envs.Space{Kind: envs.Box, Shape: []int{1}},
	Action: envs.Space{Kind: envs.Discrete, N: 1}, Agents: []string{"a", "b", "c"}}

// Agents finish at different times: each slot reports its own end once,
// sits out until the last, and the instance then resets.
func TestAgentsFinishAtDifferentTimes(t *testing.T) {
	b, err := New(raceSpec, 3, func() Env { return &race{} })
	if err != nil {
		t.Fatal(err)
	}
	obs, fin := make([]float32, 3), make([]float32, 3)
	rew, act := make([]float32, 3), make([]float32, 3)
	term, trunc := make([]bool, 3), make([]bool, 3)
	if err := b.Reset(0, obs); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		rew  []float32
		term []bool
		obs  float32
	}{
		{[]float32{1, 1, 1}, []bool{true, false, false}, 1},
		{[]float32{0, 1, 1}, []bool{false, true, false}, 2},
		{[]float32{0, 0, 1}, []bool{false, false, true}, 0}, // all done: reset
		{[]float32{1, 1, 1}, []bool{true, false, false}, 1},
	}
	for s, w := range want {
		if err := b.Step(act, obs, rew, term, trunc, fin); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rew, w.rew) || !slices.Equal(term, w.term) || obs[0] != w.obs {
			t.Fatalf("step %d: rewards %v terminated %v obs %v, want %v %v %v", s, rew, term, obs, w.rew, w.term, w.obs)
		}
	}
	if fin[2] != 3 {
		t.Errorf("agent c's final observation is %v, want 3 (its last step's)", fin[2])
	}
}

func TestBatchSnapshotAndRefusals(t *testing.T) {
	b, _ := New(raceSpec, 6, func() Env { return &race{} })
	obs := make([]float32, 6)
	_ = b.Reset(0, obs)
	act, rew, fin := make([]float32, 6), make([]float32, 6), make([]float32, 6)
	term, trunc := make([]bool, 6), make([]bool, 6)
	_ = b.Step(act, obs, rew, term, trunc, fin)
	snap, err := b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	c, _ := New(raceSpec, 6, func() Env { return &race{} })
	if err := c.RestoreSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	again, _ := c.Snapshot()
	if !bytes.Equal(snap, again) {
		t.Fatal("a restored batch snapshots differently")
	}
	if err := c.RestoreSnapshot(snap[:len(snap)-1]); err == nil {
		t.Error("a truncated snapshot was accepted")
	}
	if _, err := New(raceSpec, 4, func() Env { return &race{} }); err == nil {
		t.Error("4 slots of a 3-agent game were accepted")
	}
	act[1] = 5
	if err := b.Step(act, obs, rew, term, trunc, fin); err == nil || !errors.Is(err, ErrAction) {
		t.Errorf("an action outside the space: %v", err)
	}
}
