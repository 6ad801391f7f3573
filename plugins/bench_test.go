package plugins

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/trainyard/trainyard/internal/envs"
	"github.com/trainyard/trainyard/internal/envs/native"
	"github.com/trainyard/trainyard/plugins/plugintest"
)

// nativeRate holds native CartPole steps/s per batch size, measured first in
// the same run so the WASM cases can report their ratio to it.
var nativeRate = map[int]float64{}

// BenchmarkCartPole prints env-steps/s side by side: native Go, then the
// Go-built and AssemblyScript plugins with the sandbox on, single-step and
// batched: in process (wazero interruption + watchdog) and in a worker
// process (no interruption checks, killed at the deadline); then, to show
// what interruption costs, in process with it switched off (not a sandbox
// we would run) and with a context per call instead of the watchdog.
// x_native is the ratio to native at the same batch size.
func BenchmarkCartPole(b *testing.B) {
	ctx := context.Background()
	goWasm := plugintest.BuildGo(b, "./plugins/examples/cartpole")
	asWasm := plugintest.AssemblyScript(b, "cartpole-as")
	rt := newTestRuntime(b)
	off, err := NewRuntime(ctx, RuntimeConfig{noInterrupt: true})
	if err != nil {
		b.Fatal(err)
	}
	defer off.Close(ctx)
	perCall, err := NewRuntime(ctx, RuntimeConfig{ctxDeadline: true})
	if err != nil {
		b.Fatal(err)
	}
	defer perCall.Close(ctx)
	sizes := []int{1, 64, 1024}

	for _, n := range sizes {
		b.Run(fmt.Sprintf("native/n=%d", n), func(b *testing.B) {
			env, err := native.New("CartPole-v1", n)
			if err != nil {
				b.Fatal(err)
			}
			nativeRate[n] = benchEnv(b, env, 0)
		})
	}
	cases := []struct {
		name   string
		rt     *Runtime
		wasm   []byte
		worker bool
	}{
		{"go-wasm", rt, goWasm, false},
		{"as-wasm", rt, asWasm, false},
		{"go-wasm-worker", rt, goWasm, true},
		{"as-wasm-worker", rt, asWasm, true},
		{"go-wasm-nointerrupt", off, goWasm, false},
		{"as-wasm-nointerrupt", off, asWasm, false},
		{"go-wasm-ctxdeadline", perCall, goWasm, false},
		{"as-wasm-ctxdeadline", perCall, asWasm, false},
	}
	for _, c := range cases {
		m, err := c.rt.Load(ctx, c.wasm, LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
				var v envs.VecEnv
				if c.worker {
					v, err = m.NewWorkerVecEnv(ctx, n, 0, nil)
				} else {
					v, err = m.NewVecEnv(ctx, n, 0)
				}
				if err != nil {
					b.Fatal(err)
				}
				benchEnv(b, v, nativeRate[n])
			})
		}
		m.Close(ctx)
	}
}

// benchEnv steps env b.N times with random valid actions and reports
// steps/s, ns/step and, when native > 0, the ratio x_native.
func benchEnv(b *testing.B, env envs.VecEnv, native float64) float64 {
	defer env.Close()
	sp, n := env.Spec(), env.NumEnvs()
	bt := newBatch(env, sp.Observation.Dim(), sp.Action.Dim())
	rng := rand.New(rand.NewPCG(1, 2))
	const patterns = 8
	acts := make([][]float32, patterns)
	for i := range acts {
		acts[i] = make([]float32, n)
		for j := range acts[i] {
			acts[i][j] = float32(rng.IntN(2))
		}
	}
	if err := env.Reset(1, bt.obs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := env.Step(acts[i%patterns], bt.obs, bt.rew, bt.term, bt.trunc, bt.fin); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	rate := float64(b.N) * float64(n) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "steps/s")
	b.ReportMetric(1e9/rate, "ns/step")
	if native > 0 {
		b.ReportMetric(rate/native, "x_native")
	}
	return rate
}

// BenchmarkPipeRoundTrip measures one request/response through another
// process over pipes (cat echoes a byte back): the floor of what a
// watchdog-supervised worker process would add to every plugin call.
func BenchmarkPipeRoundTrip(b *testing.B) {
	cmd := exec.Command("cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { in.Close(); _ = cmd.Wait() }()
	buf := []byte{1}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := in.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(out, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallOverhead is one no-op ABI call (abi_version) per iteration:
// the fixed price of crossing into the sandbox under each interruption mode.
func BenchmarkCallOverhead(b *testing.B) {
	ctx := context.Background()
	for _, mode := range []struct {
		name string
		cfg  RuntimeConfig
	}{{"watchdog", RuntimeConfig{}}, {"ctxdeadline", RuntimeConfig{ctxDeadline: true}}, {"nointerrupt", RuntimeConfig{noInterrupt: true}}} {
		b.Run(mode.name, func(b *testing.B) {
			rt, err := NewRuntime(ctx, mode.cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close(ctx)
			m, err := rt.Load(ctx, handmadeEnv(nil).encode(), LoadOptions{})
			if err != nil {
				b.Fatal(err)
			}
			in, err := m.acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := in.call(ctx, fnABIVersion, 0, m.limits.CallTimeout); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInstantiate: a fresh sandboxed instance per iteration (what the
// pool saves) and Load from a warm compilation cache.
func BenchmarkInstantiate(b *testing.B) {
	ctx := context.Background()
	rt := newTestRuntime(b)
	for _, c := range []struct {
		name string
		wasm []byte
	}{{"go", plugintest.BuildGo(b, "./plugins/examples/cartpole")}, {"as", plugintest.AssemblyScript(b, "cartpole-as")}} {
		m, err := rt.Load(ctx, c.wasm, LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"/instance", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				in, err := m.newInstance(ctx)
				if err != nil {
					b.Fatal(err)
				}
				in.close()
			}
		})
		b.Run(c.name+"/load-cached", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				m2, err := rt.Load(ctx, c.wasm, LoadOptions{})
				if err != nil {
					b.Fatal(err)
				}
				m2.Close(ctx)
			}
		})
		m.Close(ctx)
	}
}
