package ppo

import (
	"context"
	"fmt"
	"testing"

	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
)

// BenchmarkRolloutWASM is issue 6's "rollout throughput (WASM CartPole +
// MLP inference) in steps/s per core": the PPO rollout of one worker (one
// goroutine, Workers = 1; batched policy and value inference with the
// 64-64 tanh MLPs, action sampling, one env step call per batch, GAE) over
// CartPole run as a sandboxed plugin through pluginhost.VecEnv, beside the
// same rollout over native Go CartPole. The plugins are the example
// CartPole built with Go (plugins/cartpole, built on demand) and
// with AssemblyScript (cartpole-as, from `make plugins`, a prerequisite of
// `make bench`), loaded with the production runtime settings (interruptible,
// sandbox limits). steps/s/core is env steps per second of that goroutine;
// x_native is the ratio to native at the same batch size.
func BenchmarkRolloutWASM(b *testing.B) {
	ctx := context.Background()
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: plugintest.CacheDir(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	mods := []struct {
		name string
		wasm []byte
	}{
		{"go-wasm", plugintest.BuildGo(b, "./plugins/cartpole")},
		{"as-wasm", plugintest.AssemblyScript(b, "cartpole-as")},
	}
	for _, n := range []int{8, 64} {
		var native float64
		b.Run(fmt.Sprintf("native/envs=%d", n), func(b *testing.B) {
			native = benchRollout(b, newEnv(b, cartpole.Name, n))
		})
		for _, mod := range mods {
			b.Run(fmt.Sprintf("%s/envs=%d", mod.name, n), func(b *testing.B) {
				m, err := rt.Load(ctx, mod.wasm, pluginhost.LoadOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close(ctx)
				env, err := m.NewVecEnv(ctx, n, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer env.Close()
				rate := benchRollout(b, env)
				if native > 0 {
					b.ReportMetric(rate/native, "x_native")
				}
			})
		}
	}
}

// benchRollout times PPO rollouts of 64 steps per env on env and returns
// (and reports) env steps per second.
func benchRollout(b *testing.B, env envs.VecEnv) float64 {
	cfg := CartPoleConfig()
	cfg.Workers = 1
	cfg.NumSteps = 64
	l, err := New(env, cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var m Metrics
	var steps int
	for b.Loop() {
		if err := l.collect(ctx, &m); err != nil {
			b.Fatal(err)
		}
		l.computeGAE()
		steps += cfg.NumSteps * env.NumEnvs()
	}
	rate := float64(steps) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "steps/s/core")
	return rate
}
