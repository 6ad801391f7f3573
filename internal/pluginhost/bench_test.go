package pluginhost

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/envs/native"
)

// BenchmarkCartPole prints env-steps/s side by side: native Go, then the
// Go-built and AssemblyScript plugins with the sandbox on, single-step and
// batched: in process (the default: instrumented module + watchdog,
// interrupt.go) and in a worker process (no interruption checks, killed at
// the deadline); then, to show what interruption costs, in process with
// wazero's own checks (WithCloseOnContextDone, the previous default) and
// with interruption off (not a sandbox we would run).
//
// x_native is the ratio to native CartPole (sdk/go/envs/native, the same
// dynamics) at the same batch size, measured interleaved with the plugin in
// rounds of a few ms, so a loaded machine slows both sides alike.
func BenchmarkCartPole(b *testing.B) {
	ctx := context.Background()
	goWasm := plugintest.BuildGo(b, "./plugins/cartpole")
	asWasm := plugintest.AssemblyScript(b, "cartpole-as")
	rt := newTestRuntime(b)
	off, err := NewRuntime(ctx, RuntimeConfig{noInterrupt: true})
	if err != nil {
		b.Fatal(err)
	}
	defer off.Close(ctx)
	checks, err := NewRuntime(ctx, RuntimeConfig{wazeroChecks: true})
	if err != nil {
		b.Fatal(err)
	}
	defer checks.Close(ctx)
	sizes := []int{1, 64, 1024}
	newNative := func(b *testing.B, n int) envs.VecEnv {
		env, err := native.New("CartPole-v1", n)
		if err != nil {
			b.Fatal(err)
		}
		return env
	}

	for _, n := range sizes {
		b.Run(fmt.Sprintf("native/n=%d", n), func(b *testing.B) {
			benchEnv(b, newNative(b, n), nil)
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
		{"go-wasm-wazerochecks", checks, goWasm, false},
		{"as-wasm-wazerochecks", checks, asWasm, false},
		{"go-wasm-nointerrupt", off, goWasm, false},
		{"as-wasm-nointerrupt", off, asWasm, false},
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
				benchEnv(b, v, newNative(b, n))
			})
		}
		m.Close(ctx)
	}
}

// stepper steps one env with random valid actions.
type stepper struct {
	env  envs.VecEnv
	bt   *batch
	acts [][]float32
	i    int
}

func newStepper(b *testing.B, env envs.VecEnv) *stepper {
	sp, n := env.Spec(), env.NumEnvs()
	s := &stepper{env: env, bt: newBatch(env, sp.Observation.Dim(), sp.Action.Dim())}
	rng := rand.New(rand.NewPCG(1, 2))
	const patterns = 8
	s.acts = make([][]float32, patterns)
	for i := range s.acts {
		s.acts[i] = make([]float32, n)
		for j := range s.acts[i] {
			s.acts[i][j] = float32(rng.IntN(2))
		}
	}
	if err := env.Reset(1, s.bt.obs); err != nil {
		b.Fatal(err)
	}
	return s
}

// run steps k times and returns how long that took.
func (s *stepper) run(b *testing.B, k int) time.Duration {
	bt := s.bt
	start := time.Now()
	for j := 0; j < k; j++ {
		s.i++
		if err := s.env.Step(s.acts[s.i%len(s.acts)], bt.obs, bt.rew, bt.term, bt.trunc, bt.fin); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// benchEnv steps env b.N times with random valid actions and reports
// steps/s and ns/step. With a reference env it also steps that one, in
// alternating rounds of about the same number of env-steps, and reports
// its rate (native_steps/s) and the ratio x_native.
func benchEnv(b *testing.B, env, ref envs.VecEnv) {
	defer env.Close()
	n := env.NumEnvs()
	s := newStepper(b, env)
	var r *stepper
	if ref != nil {
		defer ref.Close()
		r = newStepper(b, ref)
	}
	round := max(1, 4096/n) // calls per round: ~4096 env-steps
	var took, refTook time.Duration
	var refSteps int
	b.ResetTimer()
	for done := 0; done < b.N; {
		k := min(round, b.N-done)
		took += s.run(b, k)
		done += k
		if r != nil {
			refTook += r.run(b, k)
			refSteps += k
		}
	}
	b.StopTimer()
	rate := float64(b.N) * float64(n) / took.Seconds()
	b.ReportMetric(rate, "steps/s")
	b.ReportMetric(1e9/rate, "ns/step")
	if r != nil {
		refRate := float64(refSteps) * float64(n) / refTook.Seconds()
		b.ReportMetric(refRate, "native_steps/s")
		b.ReportMetric(rate/refRate, "x_native")
	}
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
	}{{"go", plugintest.BuildGo(b, "./plugins/cartpole")}, {"as", plugintest.AssemblyScript(b, "cartpole-as")}} {
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
