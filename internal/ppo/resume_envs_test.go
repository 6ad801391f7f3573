//go:build !race

// Compiled out under -race: whole PPO iterations compared bit for bit,
// no goroutines of its own; ppo-learn (mk/ppo.mk) runs it without.

package ppo

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/pendulum"
)

// TestResumeIsExactOnEveryEnvKind is "a run killed at any iteration and
// resumed produces the uninterrupted run's metrics" at the learner: for
// native envs, Go and AssemblyScript env plugins and a plugin env under an
// AssemblyScript reward plugin, a learner interrupted after k iterations
// (for several k) is saved, restored onto a fresh env whose instance last
// ran other episodes (a pooled plugin instance, reset with another seed),
// and continued to m: every iteration's metrics and the whole final state
// (weights, Adam, normalisation, RNG, counters, episodes in flight and the
// envs' own state, as the checkpoint bytes) equal the uninterrupted
// learner's bit for bit. The uninterrupted learner saves after every
// iteration too, as a run's segments do: saving must not disturb it.
func TestResumeIsExactOnEveryEnvKind(t *testing.T) {
	const m, n = 8, 4
	ctx := context.Background()
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: plugintest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	load := func(t *testing.T, wasm []byte) *pluginhost.Module {
		t.Helper()
		mod, err := rt.Load(ctx, wasm, pluginhost.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mod.Close(ctx) })
		return mod
	}
	// plugin opens n envs of a module, under a reward module when given;
	// its modules load once, so a restore lands on a pooled instance that
	// ran other episodes.
	plugin := func(env, reward []byte) func(t *testing.T) envs.VecEnv {
		var envMod, rewardMod *pluginhost.Module
		return func(t *testing.T) envs.VecEnv {
			t.Helper()
			if envMod == nil {
				envMod = load(t, env)
				if reward != nil {
					rewardMod = load(t, reward)
				}
			}
			v, err := envMod.NewVecEnv(ctx, n, 99)
			if err != nil {
				t.Fatal(err)
			}
			if rewardMod == nil {
				return v
			}
			s, err := pluginhost.Shape(ctx, v, rewardMod)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	goCartPole := plugintest.BuildGo(t, "./plugins/cartpole")
	for _, tc := range []struct {
		name, env string
		open      func(t *testing.T) envs.VecEnv
	}{
		{"native CartPole-v1", cartpole.Name, func(t *testing.T) envs.VecEnv { return newEnv(t, cartpole.Name, n) }},
		{"native Pendulum-v1", pendulum.Name, func(t *testing.T) envs.VecEnv { return newEnv(t, pendulum.Name, n) }},
		{"Go plugin CartPole-v1", cartpole.Name, plugin(goCartPole, nil)},
		{"Go plugin Pendulum-v1 (native VecEnv registered as is)", pendulum.Name, plugin(plugintest.BuildGo(t, "./plugins/pendulum"), nil)},
		{"AssemblyScript plugin cartpole-as", "cartpole-as", plugin(plugintest.AssemblyScript(t, "cartpole-as"), nil)},
		{"Go plugin CartPole-v1 under AssemblyScript reward-clip-as", cartpole.Name, plugin(goCartPole, plugintest.AssemblyScript(t, "reward-clip-as"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := smallConfig(tc.env, 1)
			save := func(l *Learner) []byte {
				t.Helper()
				var b bytes.Buffer
				if err := l.Save(&b); err != nil {
					t.Fatal(err)
				}
				return b.Bytes()
			}
			env := tc.open(t)
			straight, err := New(env, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var want []Metrics
			var snapshot []byte
			for range m {
				want = append(want, run(t, straight, 1)...)
				snapshot = save(straight)
			}
			if h := header(t, snapshot); len(h.EnvSnapshot) == 0 {
				t.Fatalf("the checkpoint holds no env state: %s cannot save its envs", tc.name)
			}
			closeEnv(env) // its plugin instance returns to the pool

			for _, k := range []int{1, 2, 3, 5, 7} {
				t.Run(fmt.Sprintf("killed after %d", k), func(t *testing.T) {
					env := tc.open(t)
					first, err := New(env, cfg)
					if err != nil {
						t.Fatal(err)
					}
					got := run(t, first, k)
					ckpt := save(first)
					closeEnv(env) // the node is gone; its instance returns to the pool
					fresh := tc.open(t)
					if err := fresh.Reset(12345, make([]float32, n*fresh.Spec().Observation.Dim())); err != nil {
						t.Fatal(err)
					}
					resumed, err := Restore(bytes.NewReader(ckpt), fresh)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, run(t, resumed, m-k)...)
					for i := range want {
						if !reflect.DeepEqual(got[i], want[i]) {
							t.Fatalf("iteration %d differs from the uninterrupted run:\n resumed  %+v\n straight %+v", i+1, got[i], want[i])
						}
					}
					if end := save(resumed); !bytes.Equal(end, snapshot) {
						t.Fatalf("the state at iteration %d (%d bytes) differs from the uninterrupted run's (%d bytes)", m, len(end), len(snapshot))
					}
					closeEnv(fresh)
				})
			}
		})
	}
}

// closeEnv closes a plugin env (native ones need nothing).
func closeEnv(e envs.VecEnv) {
	if c, ok := e.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}

// header decodes a checkpoint's JSON header (format in checkpoint.go).
func header(t *testing.T, ckpt []byte) checkpointHeader {
	t.Helper()
	p := len(ckptMagic) + 4
	hl := int(binary.LittleEndian.Uint32(ckpt[p:]))
	var h checkpointHeader
	if err := json.Unmarshal(ckpt[p+4:p+4+hl], &h); err != nil {
		t.Fatal(err)
	}
	return h
}
