package envserver

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/plugintest"
)

// BenchmarkPythonClient: CartPole stepped by the Python client through the
// env server against the same module stepped in process (VecEnv.Step, the
// built-in learner's path), at n=64 and n=1024 envs, in alternating rounds
// of 1,000 steps each so that a busy machine slows both alike. It reports
// both rates in env steps/s and x_inprocess, the client's share of the
// in-process rate (issue target at n=1024: ≥ 0.7).
func BenchmarkPythonClient(b *testing.B) {
	needNumpy(b)
	wasm := plugintest.BuildGo(b, "./plugins/cartpole")
	sock, rt := testServer(b, map[string][]byte{"CartPole-v1": wasm})
	mod, err := rt.Load(context.Background(), wasm, pluginhost.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer mod.Close(context.Background())
	const steps = 1000
	for _, n := range []int{64, 1024} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			v, err := mod.NewVecEnv(context.Background(), n, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer v.Close()
			obs, rew, final := make([]float32, 4*n), make([]float32, n), make([]float32, 4*n)
			term, trunc := make([]bool, n), make([]bool, n)
			if err := v.Reset(0, obs); err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(0, 0))
			var actions [16][]float32
			for i := range actions {
				actions[i] = make([]float32, n)
				for j := range actions[i] {
					actions[i][j] = float32(rng.IntN(2))
				}
			}
			py := startStepper(b, sock, n)
			var host, client time.Duration
			for b.Loop() {
				t0 := time.Now()
				for i := range steps {
					if err := v.Step(actions[i%16], obs, rew, term, trunc, final); err != nil {
						b.Fatal(err)
					}
				}
				host += time.Since(t0)
				client += py(steps)
			}
			rounds := float64(b.N)
			hostRate := float64(n*steps) * rounds / host.Seconds()
			clientRate := float64(n*steps) * rounds / client.Seconds()
			b.ReportMetric(hostRate, "inprocess-steps/s")
			b.ReportMetric(clientRate, "client-steps/s")
			b.ReportMetric(clientRate/hostRate, "x_inprocess")
		})
	}
}

// startStepper starts steprate.py on the env server and returns a function
// that has it step k times and returns how long that took.
func startStepper(b *testing.B, sock string, n int) func(k int) time.Duration {
	cmd := exec.Command(python, filepath.Join(plugintest.Root(b), "sdk/python/tests/steprate.py"), "--socket", sock, "--env", "CartPole-v1", "--num-envs", strconv.Itoa(n))
	cmd.Env = pythonEnv(b)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("steprate.py: %v\n%s", err, stderr.String())
		}
	})
	out := bufio.NewScanner(outPipe)
	if !out.Scan() || out.Text() != "ready" {
		b.Fatalf("steprate.py did not start: %s", stderr.String())
	}
	return func(k int) time.Duration {
		fmt.Fprintln(in, k)
		if !out.Scan() {
			b.Fatalf("steprate.py: %s", stderr.String())
		}
		s, err := strconv.ParseFloat(out.Text(), 64)
		if err != nil {
			b.Fatal(err)
		}
		return time.Duration(s * float64(time.Second))
	}
}
