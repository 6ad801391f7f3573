package pluginhost

import (
	"context"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/envs/native"
)

// TestNativeParity: the Go-built CartPole and Pendulum plugins step
// bit-identically to the native reference VecEnv for a fixed seed, across
// many episodes (auto-resets included) and batch sizes.
func TestNativeParity(t *testing.T) {
	rt := newTestRuntime(t)
	tests := []struct {
		pkg, name string
		steps     int
	}{
		{"./plugins/cartpole", "CartPole-v1", 3000},
		{"./plugins/pendulum", "Pendulum-v1", 1000},
	}
	for _, tc := range tests {
		m := load(t, rt, plugintest.BuildGo(t, tc.pkg), testLimits)
		for _, n := range []int{1, 7, 64} {
			t.Run(tc.name+"/"+itoa(n), func(t *testing.T) {
				ref, err := native.New(tc.name, n)
				if err != nil {
					t.Fatal(err)
				}
				defer ref.Close()
				v, err := m.NewVecEnv(context.Background(), n, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer v.Close()
				if !reflect.DeepEqual(v.Spec(), ref.Spec()) {
					t.Fatalf("spec %+v, native %+v", v.Spec(), ref.Spec())
				}
				compareRollout(t, ref, v, 20260, tc.steps)
			})
		}
	}
}

func itoa(n int) string { return string(rune('0'+n/10%10)) + string(rune('0'+n%10)) }

// compareRollout drives both envs with the same random actions and fails on
// the first bit that differs.
func compareRollout(t *testing.T, want, got envs.VecEnv, seed uint64, steps int) {
	t.Helper()
	sp, n := want.Spec(), want.NumEnvs()
	od, ad := sp.Observation.Dim(), sp.Action.Dim()
	w, g := newBatch(want, od, ad), newBatch(got, od, ad)
	if err := want.Reset(seed, w.obs); err != nil {
		t.Fatal(err)
	}
	if err := got.Reset(seed, g.obs); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "reset obs", w.obs, g.obs)
	rng := rand.New(rand.NewPCG(seed, 1))
	episodes := 0
	for s := 0; s < steps; s++ {
		for i := range w.act {
			if sp.Action.Kind == envs.Discrete {
				w.act[i] = float32(rng.IntN(sp.Action.N))
			} else {
				w.act[i] = float32(rng.NormFloat64() * 2) // beyond ±2 too: clipping must agree
			}
		}
		copy(g.act, w.act)
		if err := want.Step(w.act, w.obs, w.rew, w.term, w.trunc, w.fin); err != nil {
			t.Fatal(err)
		}
		if err := got.Step(g.act, g.obs, g.rew, g.term, g.trunc, g.fin); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "obs", w.obs, g.obs)
		sameBits(t, "rewards", w.rew, g.rew)
		for i := 0; i < n; i++ {
			if w.term[i] != g.term[i] || w.trunc[i] != g.trunc[i] {
				t.Fatalf("step %d env %d: terminated/truncated %v/%v, native %v/%v", s, i, g.term[i], g.trunc[i], w.term[i], w.trunc[i])
			}
			if w.term[i] || w.trunc[i] {
				episodes++
				sameBits(t, "final obs", w.fin[i*od:(i+1)*od], g.fin[i*od:(i+1)*od])
			}
		}
	}
	if episodes < 2 {
		t.Fatalf("only %d episodes ended: the test did not cover auto-reset", episodes)
	}
	t.Logf("%d steps × %d envs, %d episodes, bit-identical", steps, n, episodes)
}

func sameBits(t *testing.T, what string, want, got []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("%s[%d] = %v (%#x), native %v (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}
