package pluginhost

import (
	"context"
	"errors"
	"testing"

	"github.com/trainyard/trainyard/internal/plugintest"
)

// shapeRef is the shaping plugin's formula computed natively in float32.
func shapeRef(obs, next []float32, r float32) float32 {
	pot := func(s []float32) float32 {
		var sum float32
		for _, x := range s {
			sum += x * x
		}
		return -0.1 * sum
	}
	return r + 0.99*pot(next) - pot(obs)
}

func TestRewardBatch(t *testing.T) {
	rt := newTestRuntime(t)
	wasm := plugintest.BuildGo(t, "./plugins/shaping")
	meta, err := rt.Validate(context.Background(), wasm, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Kind != KindReward || meta.Name != "potential-shaping" {
		t.Fatalf("metadata %+v", meta)
	}
	m := load(t, rt, wasm, testLimits)
	ctx := context.Background()
	for _, tc := range []struct{ n, od, ad int }{{1, 1, 1}, {5, 4, 1}, {300, 3, 2}, {7, 4, 1}} {
		obs, next := make([]float32, tc.n*tc.od), make([]float32, tc.n*tc.od)
		act, env, out := make([]float32, tc.n*tc.ad), make([]float32, tc.n), make([]float32, tc.n)
		for i := range obs {
			obs[i], next[i] = float32(i%7)-3, float32(i%5)*0.5
		}
		for i := range env {
			env[i] = float32(i%3) - 1
		}
		if err := m.RewardBatch(ctx, tc.od, tc.ad, obs, act, next, env, out); err != nil {
			t.Fatal(err)
		}
		for i := range out {
			want := shapeRef(obs[i*tc.od:(i+1)*tc.od], next[i*tc.od:(i+1)*tc.od], env[i])
			if out[i] != want {
				t.Fatalf("n=%d od=%d: out[%d] = %v, want %v", tc.n, tc.od, i, out[i], want)
			}
		}
	}
	if err := m.RewardBatch(ctx, 2, 1, make([]float32, 3), make([]float32, 1), make([]float32, 2), make([]float32, 1), make([]float32, 1)); err == nil {
		t.Fatal("mismatched sizes accepted")
	}
}

// TestShapedVecEnv composes an env plugin with the reward plugin.
func TestShapedVecEnv(t *testing.T) {
	rt := newTestRuntime(t)
	env := load(t, rt, plugintest.BuildGo(t, "./internal/pluginhost/testdata/hostile"), testLimits)
	shaping := load(t, rt, plugintest.BuildGo(t, "./plugins/shaping"), testLimits)
	ctx := context.Background()
	v, err := env.NewVecEnv(ctx, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	s, err := Shape(ctx, v, shaping)
	if err != nil {
		t.Fatal(err)
	}
	b := newBatch(v, 1, 1)
	if err := s.Reset(0, b.obs); err != nil {
		t.Fatal(err)
	}
	// The hostile env in mode 0 writes obs[i] = i and reward 1.
	if err := s.Step(b.act, b.obs, b.rew, b.term, b.trunc, b.fin); err != nil {
		t.Fatal(err)
	}
	for i, r := range b.rew {
		if want := shapeRef([]float32{0}, []float32{float32(i)}, 1); r != want {
			t.Errorf("shaped reward %d = %v, want %v", i, r, want)
		}
	}
	if _, err := Shape(ctx, v, env); err == nil || errors.Is(err, ErrInvalidPlugin) {
		t.Errorf("shaping with an env plugin: %v, want a kind error", err)
	}
}

// TestAssemblyScriptReward: the AssemblyScript reward plugin clips rewards
// to their sign for any env dimensions.
func TestAssemblyScriptReward(t *testing.T) {
	rt := newTestRuntime(t)
	wasm := plugintest.AssemblyScript(t, "reward-clip-as")
	if _, err := rt.Validate(context.Background(), wasm, testLimits); err != nil {
		t.Fatal(err)
	}
	m := load(t, rt, wasm, testLimits)
	env := []float32{3, -0.5, 0, 1e-30, -7}
	for _, od := range []int{1, 4, 17} {
		out := make([]float32, len(env))
		obs := make([]float32, len(env)*od)
		if err := m.RewardBatch(context.Background(), od, 2, obs, make([]float32, 2*len(env)), obs, env, out); err != nil {
			t.Fatal(err)
		}
		want := []float32{1, -1, 0, 1, -1}
		for i := range want {
			if out[i] != want[i] {
				t.Fatalf("obs_dim %d: out = %v, want %v", od, out, want)
			}
		}
	}
}
