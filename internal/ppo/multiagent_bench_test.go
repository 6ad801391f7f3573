package ppo

import (
	"context"
	"testing"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// BenchmarkMultiAgentEnv is the Iterated Prisoner's Dilemma stepped at a
// batch of 1024 games (2048 agent slots) as the sandboxed plugin
// (plugins/ipd through pluginhost.VecEnv) beside the same game natively in
// Go (sdk/go/envs/multiagent); x_native is the plugin's ratio to native.
func BenchmarkMultiAgentEnv(b *testing.B) {
	ctx := context.Background()
	const games = 1024
	var native float64
	b.Run("native", func(b *testing.B) { native = benchSteps(b, ipdEnv(b, games)) })
	b.Run("go-wasm", func(b *testing.B) {
		rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: plugintest.CacheDir(b)})
		if err != nil {
			b.Fatal(err)
		}
		defer rt.Close(ctx)
		m, err := rt.Load(ctx, plugintest.BuildGo(b, "./plugins/ipd"), pluginhost.LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close(ctx)
		env, err := m.NewVecEnv(ctx, 2*games, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer env.Close()
		if rate := benchSteps(b, env); native > 0 {
			b.ReportMetric(rate/native, "x_native")
		}
	})
}

// benchSteps steps env with all-cooperate actions and reports game steps
// (instances, not agent slots) per second.
func benchSteps(b *testing.B, env envs.VecEnv) float64 {
	n, od := env.NumEnvs(), env.Spec().Observation.Dim()
	obs, fin := make([]float32, n*od), make([]float32, n*od)
	act, rew := make([]float32, n), make([]float32, n)
	term, trunc := make([]bool, n), make([]bool, n)
	if err := env.Reset(0, obs); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := env.Step(act, obs, rew, term, trunc, fin); err != nil {
			b.Fatal(err)
		}
	}
	rate := float64(b.N*n/len(env.Spec().Agents)) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "games_steps/s")
	return rate
}

// BenchmarkMultiAgentIterate is PPO iterations per second on the IPD with
// one policy shared by both agents against two policies, one each, on the
// same env steps (8 games × 128 rounds); x_one_policy is the ratio.
func BenchmarkMultiAgentIterate(b *testing.B) {
	var one float64
	for _, tc := range []struct {
		name string
		ma   *learner.MultiAgent
	}{{"one_policy", nil}, {"two_policies", &learner.MultiAgent{
		Policies: map[string]learner.Policy{"a": {}, "b": {}},
		Mapping:  map[string]string{"agent_0": "a", "agent_1": "b"},
	}}} {
		b.Run(tc.name, func(b *testing.B) {
			l, err := Factory{}.New(learner.Env{Train: ipdEnv(b, 8)}, learner.Knobs{Seed: 1, Workers: 1, MultiAgent: tc.ma})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for b.Loop() {
				if _, err := l.Iterate(ctx); err != nil {
					b.Fatal(err)
				}
			}
			rate := float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "iterations/s")
			if one == 0 {
				one = rate
			} else {
				b.ReportMetric(rate/one, "x_one_policy")
			}
		})
	}
}
