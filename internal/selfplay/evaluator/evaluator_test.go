package evaluator

import (
	"bufio"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/pythontest"
)

// fake is a BatchEvaluator whose answers follow from the observation: the
// logit of action a is obs[0]*(a+1), value i is obs[0]+i. It records the
// batch sizes it saw.
type fake struct {
	d     Dims
	mu    sync.Mutex
	sizes []int
}

func (f *fake) Dims() Dims { return f.d }

func (f *fake) EvaluateBatch(n int, obs, logits, values []float32) error {
	f.mu.Lock()
	f.sizes = append(f.sizes, n)
	f.mu.Unlock()
	for i := range n {
		x := obs[i*f.d.ObsDim]
		for a := range f.d.Actions {
			logits[i*f.d.Actions+a] = x * float32(a+1)
		}
		for p := range f.d.Players {
			values[i*f.d.Players+p] = x + float32(p)
		}
	}
	return nil
}

// wantPriors is the softmax of fake's logits for x over the legal actions.
func wantPriors(x float32, legal []bool) []float64 {
	out := make([]float64, len(legal))
	var z float64
	for a, ok := range legal {
		if ok {
			out[a] = math.Exp(float64(x) * float64(a+1))
			z += out[a]
		}
	}
	for a := range out {
		out[a] /= z
	}
	return out
}

// TestBatcherGathersConcurrentSearches: 40 searches at once, each asking
// for 25 positions in turn, give batches as large as the searches in
// flight (never above MaxBatch), and every answer is its own position's.
func TestBatcherGathersConcurrentSearches(t *testing.T) {
	for _, tc := range []struct {
		name     string
		searches int
		maxBatch int
	}{
		{"batches of every search", 40, 256},
		{"capped at max_batch", 40, 16},
		{"one search", 1, 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fake{d: Dims{ObsDim: 3, Actions: 5, Players: 2, MaxBatch: tc.maxBatch}}
			// A wait longer than any test: batches come from the counts
			// alone (a loaded machine, under -race, let a 1 s wait expire).
			b := NewBatcher(f, time.Hour)
			var wg sync.WaitGroup
			errs := make(chan error, tc.searches)
			for range tc.searches {
				b.Join() // all before any search starts, as a batch of games does
			}
			for s := range tc.searches {
				wg.Go(func() {
					defer b.Leave()
					for k := range 25 {
						x := float32(s*100+k) / 1000
						legal := []bool{true, k%2 == 0, true, false, true}
						pri, val := make([]float32, 5), make([]float32, 2)
						if err := b.Evaluate([]float32{x, 0, 0}, legal, pri, val); err != nil {
							errs <- err
							return
						}
						want := wantPriors(x, legal)
						for a := range pri {
							if math.Abs(float64(pri[a])-want[a]) > 1e-5 {
								t.Errorf("search %d position %d: priors %v, want %v", s, k, pri, want)
								return
							}
						}
						if val[0] != x || val[1] != x+1 {
							t.Errorf("search %d position %d: values %v, want [%v %v]", s, k, val, x, x+1)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			batches, positions := b.Stats()
			if positions != int64(tc.searches*25) {
				t.Fatalf("%d positions evaluated, want %d", positions, tc.searches*25)
			}
			biggest := 0
			for _, n := range f.sizes {
				biggest = max(biggest, n)
			}
			mean := float64(positions) / float64(batches)
			t.Logf("%d batches, mean %.1f positions, largest %d", batches, mean, biggest)
			if biggest > tc.maxBatch {
				t.Errorf("a batch of %d, above max_batch %d", biggest, tc.maxBatch)
			}
			// Every search waits for the others: batches are (nearly) all
			// of them, or max_batch.
			if want := float64(min(tc.searches, tc.maxBatch)); mean < want*0.8 {
				t.Errorf("mean batch %.1f, want about %v", mean, want)
			}
		})
	}
}

func TestSoftmaxLegal(t *testing.T) {
	pri := make([]float32, 4)
	softmaxLegal([]float32{float32(math.NaN()), float32(math.Inf(1)), 0, 0}, []bool{true, true, false, false}, pri)
	if pri[0] != 0.5 || pri[1] != 0.5 || pri[2] != 0 || pri[3] != 0 {
		t.Errorf("non-finite logits: priors %v, want uniform over the legal moves", pri)
	}
	softmaxLegal([]float32{1000, 0, 1000, -1000}, []bool{true, true, false, true}, pri)
	if pri[0] != 1 || pri[2] != 0 {
		t.Errorf("large logits: priors %v", pri)
	}
}

// pyServe starts an evaluator from sdk/python (trainyard.selfplay.serve)
// with evaluate's body, and returns its socket.
func pyServe(t testing.TB, body string) string {
	t.Helper()
	pythontest.Require(t, "TRAINYARD_REQUIRE_NUMPY", "python-numpy", "numpy")
	sock := filepath.Join(t.TempDir(), "eval.sock")
	sdk, _ := filepath.Abs("../../../sdk/python")
	script := "import sys, numpy as np\nimport trainyard.selfplay as sp\n" + body +
		"\nsp.serve(evaluate, socket_path=sys.argv[1], model='test-model', ready=lambda: print('ready', flush=True))\n"
	cmd := exec.Command(pythontest.Python, "-c", script, sock)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+sdk)
	startEvaluator(t, cmd)
	return sock
}

// startEvaluator starts an evaluator process, kills it when t ends, and
// returns what it printed before the "ready" line serve's ready prints.
func startEvaluator(t testing.TB, cmd *exec.Cmd) []string {
	t.Helper()
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := bufio.NewReader(out)
	var before []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("evaluator did not start: %v (printed %q)", err, before)
		}
		if line = strings.TrimSpace(line); line == "ready" {
			return before
		}
		before = append(before, line)
	}
}

// TestRemoteAgainstPython: the Python evaluator answers batches through the
// shared buffers; a Batcher over it gives the searches their own answers;
// an evaluate that raises is the reason every later call fails with.
func TestRemoteAgainstPython(t *testing.T) {
	sock := pyServe(t, `
calls = 0
def evaluate(obs):
    global calls
    calls += 1
    if obs[0, 1] == -1:
        raise ValueError("bad position")
    a = np.arange(1, 6, dtype=np.float32)
    return obs[:, :1] * a, np.stack([obs[:, 0], obs[:, 0] + 1], axis=1)
`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := Dims{ObsDim: 3, Actions: 5, Players: 2, MaxBatch: 64}
	r, err := Dial(ctx, sock, d)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Model != "test-model" {
		t.Errorf("model %q", r.Model)
	}
	b := NewBatcher(r, time.Hour) // batches from the counts alone
	var wg sync.WaitGroup
	for range 20 {
		b.Join()
	}
	for s := range 20 {
		wg.Go(func() {
			defer b.Leave()
			for k := range 10 {
				x := float32(s*10+k) / 500
				legal := []bool{true, true, k%3 == 0, true, false}
				pri, val := make([]float32, 5), make([]float32, 2)
				if err := b.Evaluate([]float32{x, 0, 0}, legal, pri, val); err != nil {
					t.Error(err)
					return
				}
				want := wantPriors(x, legal)
				for a := range pri {
					if math.Abs(float64(pri[a])-want[a]) > 1e-5 || val[0] != x || val[1] != x+1 {
						t.Errorf("search %d position %d: priors %v values %v, want %v [%v %v]", s, k, pri, val, want, x, x+1)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	batches, positions := b.Stats()
	t.Logf("200 positions in %d batches through the protocol", batches)
	if positions != 200 || batches > 40 {
		t.Errorf("%d positions in %d batches: want 200 in batches of about 20", positions, batches)
	}

	obs, logits, values := make([]float32, 3), make([]float32, 5), make([]float32, 2)
	obs[1] = -1
	err = r.EvaluateBatch(1, obs, logits, values)
	if err == nil || !strings.Contains(err.Error(), "ValueError: bad position") {
		t.Fatalf("an evaluate that raises: %v", err)
	}
	if err2 := r.EvaluateBatch(1, make([]float32, 3), logits, values); err2 == nil {
		t.Error("a call after the evaluator failed succeeded")
	}

	// A second connection is a session of its own.
	r2, err := Dial(ctx, sock, d)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if err := r2.EvaluateBatch(1, []float32{0.5, 0, 0}, logits, values); err != nil || values[1] != 1.5 {
		t.Errorf("second session: %v %v", err, values)
	}
}

// TestWrongShapeIsAReason: an evaluate returning the wrong shape fails the
// batch with a message naming it, not garbage priors.
func TestWrongShapeIsAReason(t *testing.T) {
	sock := pyServe(t, `
def evaluate(obs):
    return np.zeros((len(obs), 4)), np.zeros((len(obs), 2))
`)
	r, err := Dial(context.Background(), sock, Dims{ObsDim: 3, Actions: 5, Players: 2, MaxBatch: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	err = r.EvaluateBatch(2, make([]float32, 6), make([]float32, 10), make([]float32, 4))
	if err == nil || !strings.Contains(err.Error(), "reshape") {
		t.Fatalf("logits of the wrong shape: %v", err)
	}
}

func TestDialErrors(t *testing.T) {
	if _, err := Dial(context.Background(), filepath.Join(t.TempDir(), "none.sock"), Dims{ObsDim: 1, Actions: 1, Players: 1, MaxBatch: 1}); err == nil {
		t.Error("dialed a socket nobody listens on")
	}
	if _, err := Dial(context.Background(), "x", Dims{}); err == nil || !strings.Contains(err.Error(), "at least 1") {
		t.Errorf("zero dims: %v", err)
	}
}
