package pluginhost

import (
	"context"
	"testing"

	"github.com/trainyard/trainyard/internal/plugintest"
)

// TestAssemblyScriptCartPole checks the AssemblyScript plugin end to end:
// validation, spaces, and Gymnasium-like behaviour under a random policy
// (mean episode length ≈ 22 for CartPole-v1).
func TestAssemblyScriptCartPole(t *testing.T) {
	rt := newTestRuntime(t)
	wasm := plugintest.AssemblyScript(t, "cartpole-as")
	meta, err := rt.Validate(context.Background(), wasm, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Name != "cartpole-as" || meta.Observation.Dim() != 4 || meta.Action.N != 2 || meta.MaxEpisodeSteps != 500 {
		t.Fatalf("metadata %+v", meta)
	}
	m := load(t, rt, wasm, testLimits)
	v, err := m.NewVecEnv(context.Background(), 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	st, err := Rollout(context.Background(), v, 200_000, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", st)
	if st.MeanLength < 18 || st.MeanLength > 27 || st.MeanReturn != st.MeanLength || st.MinReturn < 8 || st.MaxReturn > 500 {
		t.Fatalf("random-policy stats %+v, want mean length ≈ 22 and return = length", st)
	}
	// Same seed, same trajectory: determinism inside the sandbox.
	a := rolloutObs(t, v, 5, 50)
	b := rolloutObs(t, v, 5, 50)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("rollouts with the same seed differ at %d: %v vs %v", i, a[i], b[i])
		}
	}
}

// rolloutObs steps v with a fixed action pattern and returns all observations.
func rolloutObs(t *testing.T, v *VecEnv, seed uint64, steps int) []float32 {
	t.Helper()
	b := newBatch(v, v.od, v.ad)
	if err := v.Reset(seed, b.obs); err != nil {
		t.Fatal(err)
	}
	out := append([]float32(nil), b.obs...)
	for s := 0; s < steps; s++ {
		for i := range b.act {
			b.act[i] = float32((i + s) % 2)
		}
		if err := b.step(v); err != nil {
			t.Fatal(err)
		}
		out = append(out, b.obs...)
	}
	return out
}

// TestAssemblyScriptTemplate: the SDK's template project builds into a valid
// plugin that behaves as written (always-left reaches cell 0 in 9 steps).
func TestAssemblyScriptTemplate(t *testing.T) {
	rt := newTestRuntime(t)
	wasm := plugintest.AssemblyScript(t, "goleft")
	if _, err := rt.Validate(context.Background(), wasm, testLimits); err != nil {
		t.Fatal(err)
	}
	v, err := load(t, rt, wasm, testLimits).NewVecEnv(context.Background(), 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	b := newBatch(v, 1, 1)
	if err := v.Reset(0, b.obs); err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= 9; s++ {
		if err := b.step(v); err != nil {
			t.Fatal(err)
		}
		done := s == 9
		for i := 0; i < 3; i++ {
			if b.term[i] != done || (done && (b.rew[i] != 1 || b.fin[i] != 0 || b.obs[i] != 9)) || (!done && b.obs[i] != float32(9-s)) {
				t.Fatalf("step %d env %d: obs %v reward %v terminated %v final %v", s, i, b.obs[i], b.rew[i], b.term[i], b.fin[i])
			}
		}
	}
}
