package plugin

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/native"
)

type cartpoleEnv struct{ cartpole.Env }

func (e *cartpoleEnv) Step(a, obs []float32) (float32, bool, bool) { return e.Env.Step(int(a[0]), obs) }

// TestEnvBatchMatchesNative: the SDK's batching of single envs (seeding,
// auto-reset, final observations, truncation) equals the native VecEnv.
func TestEnvBatchMatchesNative(t *testing.T) {
	meta := Metadata{Observation: Space{Kind: "box", Shape: []int{4}}, Action: Space{Kind: "discrete", N: 2}, MaxEpisodeSteps: 500}
	for _, n := range []int{1, 5, 32} {
		ref, err := native.New(cartpole.Name, n)
		if err != nil {
			t.Fatal(err)
		}
		sdk := newEnvBatch(n, meta, func() Env { return &cartpoleEnv{} })
		type bufs struct {
			obs, fin, rew []float32
			term, trunc   []bool
		}
		mk := func() bufs {
			return bufs{make([]float32, 4*n), make([]float32, 4*n), make([]float32, n), make([]bool, n), make([]bool, n)}
		}
		a, b := mk(), mk()
		if err := ref.Reset(99, a.obs); err != nil {
			t.Fatal(err)
		}
		if err := sdk.Reset(99, b.obs); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		act := make([]float32, n)
		for s := 0; s < 2000; s++ {
			for i := range act {
				act[i] = float32(rng.IntN(2))
			}
			if err := ref.Step(act, a.obs, a.rew, a.term, a.trunc, a.fin); err != nil {
				t.Fatal(err)
			}
			if err := sdk.Step(act, b.obs, b.rew, b.term, b.trunc, b.fin); err != nil {
				t.Fatal(err)
			}
			for i := range a.obs {
				if math.Float32bits(a.obs[i]) != math.Float32bits(b.obs[i]) {
					t.Fatalf("n=%d step %d: obs[%d] %v, native %v", n, s, i, b.obs[i], a.obs[i])
				}
			}
			for i := 0; i < n; i++ {
				if a.rew[i] != b.rew[i] || a.term[i] != b.term[i] || a.trunc[i] != b.trunc[i] {
					t.Fatalf("n=%d step %d env %d: (%v %v %v), native (%v %v %v)", n, s, i, b.rew[i], b.term[i], b.trunc[i], a.rew[i], a.term[i], a.trunc[i])
				}
				if a.term[i] || a.trunc[i] {
					for j := 4 * i; j < 4*i+4; j++ {
						if a.fin[j] != b.fin[j] {
							t.Fatalf("n=%d step %d: final obs differs", n, s)
						}
					}
				}
			}
		}
	}
}

func TestCheckActions(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		space Space
		acts  []float32
		ok    bool
	}{
		{Space{Kind: "discrete", N: 3}, []float32{0, 1, 2}, true},
		{Space{Kind: "discrete", N: 3}, []float32{3}, false},
		{Space{Kind: "discrete", N: 3}, []float32{-1}, false},
		{Space{Kind: "discrete", N: 3}, []float32{1.5}, false},
		{Space{Kind: "discrete", N: 3}, []float32{nan}, false},
		{Space{Kind: "multi_discrete", Nvec: []int{2, 5}}, []float32{1, 4, 0, 0}, true},
		{Space{Kind: "multi_discrete", Nvec: []int{2, 5}}, []float32{2, 0}, false},
		{Space{Kind: "box", Shape: []int{2}}, []float32{-1e30, 7}, true},
		{Space{Kind: "box", Shape: []int{2}}, []float32{0, nan}, false},
	}
	for _, tc := range tests {
		err := checkActions(tc.space, tc.acts)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, errBadInput)) {
			t.Errorf("%+v %v: err = %v, want ok=%v", tc.space, tc.acts, err, tc.ok)
		}
	}
}

func TestSpaceDim(t *testing.T) {
	tests := []struct {
		s    Space
		want int
	}{
		{Space{Kind: "box", Shape: []int{2, 3}}, 6},
		{Space{Kind: "discrete", N: 9}, 1},
		{Space{Kind: "multi_discrete", Nvec: []int{2, 2, 2}}, 3},
		{Space{}, 0},
	}
	for _, tc := range tests {
		if got := tc.s.Dim(); got != tc.want {
			t.Errorf("%+v.Dim() = %d, want %d", tc.s, got, tc.want)
		}
	}
}

// TestEnvBatchStateResumesBitForBit: a batch restored from SaveState into
// fresh envs steps exactly as the one it was saved from (episodes, random
// streams and step counts included); a state for other envs is refused.
func TestEnvBatchStateResumesBitForBit(t *testing.T) {
	const n = 4
	meta := Metadata{Observation: Space{Kind: "box", Shape: []int{4}}, Action: Space{Kind: "discrete", N: 2}, MaxEpisodeSteps: 500}
	newBatch := func() *envBatch { return newEnvBatch(n, meta, func() Env { return &cartpoleEnv{} }) }
	step := func(b *envBatch, steps int, seed uint64) []float32 {
		rng := rand.New(rand.NewPCG(seed, 2))
		obs, fin, rew := make([]float32, 4*n), make([]float32, 4*n), make([]float32, n)
		term, trunc := make([]bool, n), make([]bool, n)
		var trace []float32
		act := make([]float32, n)
		for range steps {
			for i := range act {
				act[i] = float32(rng.IntN(2))
			}
			if err := b.Step(act, obs, rew, term, trunc, fin); err != nil {
				t.Fatal(err)
			}
			trace = append(append(trace, obs...), rew...)
		}
		return trace
	}
	a := newBatch()
	if err := a.Reset(7, make([]float32, 4*n)); err != nil {
		t.Fatal(err)
	}
	step(a, 37, 1)
	state, err := a.SaveState(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := newBatch()
	if err := b.Reset(12345, make([]float32, 4*n)); err != nil { // another state, as on another node
		t.Fatal(err)
	}
	if err := b.RestoreState(state); err != nil {
		t.Fatal(err)
	}
	want, got := step(a, 600, 3), step(b, 600, 3) // past the 500-step truncation
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("value %d after the restore: %v, want %v", i, got[i], want[i])
		}
	}
	if err := newEnvBatch(n+1, meta, func() Env { return &cartpoleEnv{} }).RestoreState(state); !errors.Is(err, errBadInput) {
		t.Fatalf("a state of %d envs restored into %d: %v", n, n+1, err)
	}
}
