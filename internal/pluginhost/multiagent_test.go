package pluginhost

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/envs/multiagent"
	"github.com/trainyard/trainyard/sdk/go/envs/spread"
)

// A three-agent env with an action mask passes the upload's checks (which
// open whole games: a batch of 2 slots is not one) and steps bit for bit
// as the native batch it is built on.
func TestMultiAgentPluginMatchesNative(t *testing.T) {
	ctx := context.Background()
	rt, err := NewRuntime(ctx, RuntimeConfig{CacheDir: plugintest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	wasm := plugintest.BuildGo(t, "./plugins/spread")
	meta, err := rt.Validate(ctx, wasm, DefaultLimits())
	if err != nil {
		t.Fatalf("upload checks: %v", err)
	}
	if !meta.ActionMask || !slices.Equal(meta.Agents, spread.AgentNames) || meta.Slots(4) != 12 {
		t.Fatalf("metadata: mask %v, agents %v, 4 games in %d slots", meta.ActionMask, meta.Agents, meta.Slots(4))
	}
	m, err := rt.Load(ctx, wasm, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	const games = 4
	plug, err := m.NewVecEnv(ctx, meta.Slots(games), 5)
	if err != nil {
		t.Fatal(err)
	}
	defer plug.Close()
	native, err := multiagent.New(spread.Spec(), meta.Slots(games), func() multiagent.Env { return &spread.Env{} })
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	type out struct {
		obs, fin, rew []float32
		term, trunc   []bool
	}
	n, od := meta.Slots(games), spread.ObsDim
	mk := func() *out {
		return &out{make([]float32, n*od), make([]float32, n*od), make([]float32, n), make([]bool, n), make([]bool, n)}
	}
	a, b := mk(), mk()
	for _, e := range []struct {
		env envs.VecEnv
		o   *out
	}{{plug, a}, {native, b}} {
		if err := e.env.Reset(5, e.o.obs); err != nil {
			t.Fatal(err)
		}
	}
	actions := make([]float32, n)
	for step := range 3 * spread.Steps {
		if !slices.Equal(a.obs, b.obs) {
			t.Fatalf("step %d: observations differ", step)
		}
		for i := range actions {
			actions[i] = float32(rng.IntN(spread.Moves))
		}
		for _, e := range []struct {
			env envs.VecEnv
			o   *out
		}{{plug, a}, {native, b}} {
			if err := e.env.Step(actions, e.o.obs, e.o.rew, e.o.term, e.o.trunc, e.o.fin); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(a.rew, b.rew) || !slices.Equal(a.trunc, b.trunc) {
			t.Fatalf("step %d: rewards or truncations differ: %v vs %v", step, a.rew, b.rew)
		}
	}
}
