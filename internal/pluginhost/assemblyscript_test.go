package pluginhost

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/sdk/go/envs/ipd"
	"github.com/trainyard/trainyard/sdk/go/envs/multiagent"
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

// TestAssemblyScriptMultiAgentMatchesGo: the AssemblyScript SDK's
// multi-agent helper (MultiAgentEnv, registerMultiAgentEnv) batches a game
// as the Go SDK's multiagent.Batch does: plugins/ipd-as steps
// bit-identically to the Go game over random play across episode ends, its
// state saved mid-episode restores into a fresh batch that goes on the
// same, and a batch that is not whole games is refused.
func TestAssemblyScriptMultiAgentMatchesGo(t *testing.T) {
	ctx := context.Background()
	rt := newTestRuntime(t)
	wasm := plugintest.AssemblyScript(t, "ipd-as")
	meta, err := rt.Validate(ctx, wasm, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(meta.Agents, ipd.Agents) || meta.Observation.Dim() != ipd.ObsDim || meta.MaxEpisodeSteps != ipd.Rounds {
		t.Fatalf("metadata %+v", meta)
	}
	m := load(t, rt, wasm, testLimits)
	const slots = 8
	open := func() (*VecEnv, *multiagent.Batch) {
		v, err := m.NewVecEnv(ctx, slots, 3)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close() })
		g, err := multiagent.New(ipd.Spec(), slots, func() multiagent.Env { return &ipd.Env{} })
		if err != nil {
			t.Fatal(err)
		}
		return v, g
	}
	v, g := open()
	a, b := newBatch(v, ipd.ObsDim, 1), newBatch(g, ipd.ObsDim, 1)
	if err := v.Reset(3, a.obs); err != nil {
		t.Fatal(err)
	}
	if err := g.Reset(3, b.obs); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	same := func(step int) {
		t.Helper()
		for k := range a.term {
			if a.term[k] != b.term[k] || a.trunc[k] != b.trunc[k] || a.rew[k] != b.rew[k] {
				t.Fatalf("step %d slot %d: plugin (r %v, term %v, trunc %v), Go (r %v, term %v, trunc %v)", step, k, a.rew[k], a.term[k], a.trunc[k], b.rew[k], b.term[k], b.trunc[k])
			}
			if (a.trunc[k] || a.term[k]) && !slices.Equal(a.fin[k*ipd.ObsDim:(k+1)*ipd.ObsDim], b.fin[k*ipd.ObsDim:(k+1)*ipd.ObsDim]) {
				t.Fatalf("step %d slot %d: final observations differ", step, k)
			}
		}
		if !slices.Equal(a.obs, b.obs) {
			t.Fatalf("step %d: observations differ:\nplugin %v\nGo     %v", step, a.obs, b.obs)
		}
	}
	same(0)
	// Random play across two episode ends; the plugin's state is saved
	// after round 150 and the rounds after it recorded.
	const saveAt, rounds = 150, 250
	var snap []byte
	type round struct {
		act, obs, rew []float32
		term, trunc   []bool
	}
	var after []round
	truncs := 0
	for step := 1; step <= rounds; step++ {
		for i := range a.act {
			x := float32(rng.IntN(2))
			a.act[i], b.act[i] = x, x
		}
		if err := a.step(v); err != nil {
			t.Fatal(err)
		}
		if err := g.Step(b.act, b.obs, b.rew, b.term, b.trunc, b.fin); err != nil {
			t.Fatal(err)
		}
		same(step)
		for _, tr := range a.trunc {
			if tr {
				truncs++
			}
		}
		switch {
		case step == saveAt:
			if snap, err = v.Snapshot(); err != nil {
				t.Fatal(err)
			}
		case step > saveAt:
			after = append(after, round{slices.Clone(a.act), slices.Clone(a.obs), slices.Clone(a.rew), slices.Clone(a.term), slices.Clone(a.trunc)})
		}
	}
	if truncs != 2*slots {
		t.Fatalf("%d slots truncated in %d rounds, want every slot twice (%d)", truncs, rounds, 2*slots)
	}
	// A fresh batch restored to round 150 plays rounds 151.. as the
	// original did.
	v2, _ := open()
	if err := v2.RestoreSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	c := newBatch(v2, ipd.ObsDim, 1)
	for i, r := range after {
		copy(c.act, r.act)
		if err := c.step(v2); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.obs, r.obs) || !slices.Equal(c.rew, r.rew) || !slices.Equal(c.term, r.term) || !slices.Equal(c.trunc, r.trunc) {
			t.Fatalf("round %d after the restore differs from the original's", saveAt+1+i)
		}
	}
	if _, err := m.NewVecEnv(ctx, slots-1, 1); err == nil {
		t.Fatal("7 slots of a two-agent game were accepted")
	}
}
