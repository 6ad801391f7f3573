package evaluator

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/pythontest"
	"github.com/trainyard/trainyard/internal/selfplay/engine"
	"github.com/trainyard/trainyard/internal/selfplay/model"
	"github.com/trainyard/trainyard/sdk/go/games/kinrow"
)

// mlp is a numpy network of square8_2p's shape (192 inputs, 64 actions, 2
// players) with two hidden layers of width, the model both sides of the
// protocol benchmark evaluate; it prints its own in-process rate at batch
// 256 before it serves.
const mlp = `
rng = np.random.default_rng(0)
W = int(sys.argv[2])
w1 = rng.standard_normal((192, W), dtype=np.float32) / 14
w2 = rng.standard_normal((W, W), dtype=np.float32) / W ** 0.5
wp = rng.standard_normal((W, 64), dtype=np.float32) / W ** 0.5
wv = rng.standard_normal((W, 2), dtype=np.float32) / W ** 0.5
def evaluate(obs):
    h = np.maximum(obs @ w1, 0)
    h = np.maximum(h @ w2, 0)
    return h @ wp, np.tanh(h @ wv)
import time
x = rng.standard_normal((256, 192), dtype=np.float32)
evaluate(x)
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < 1:
    evaluate(x)
    n += 256
print("inproc", n / (time.perf_counter() - t0), flush=True)
`

// pyMLP starts the numpy network as an evaluator and returns its socket and
// its in-process positions/s at batch 256.
func pyMLP(b *testing.B, width int) (string, float64) {
	b.Helper()
	pythontest.Require(b, "TRAINYARD_REQUIRE_NUMPY", "python-numpy", "numpy")
	sock := filepath.Join(b.TempDir(), "eval.sock")
	sdk, _ := filepath.Abs("../../../sdk/python")
	script := "import sys, numpy as np\nimport trainyard.selfplay as sp\n" + mlp +
		"\nsp.serve(evaluate, socket_path=sys.argv[1], model='mlp', ready=lambda: print('ready', flush=True))\n"
	cmd := exec.Command(pythontest.Python, "-c", script, sock, strconv.Itoa(width))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+sdk, "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1")
	var inproc float64
	for _, line := range startEvaluator(b, cmd) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "inproc" {
			inproc, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	return sock, inproc
}

// BenchmarkProtocol is issue 32's "positions evaluated per second through
// the protocol at batch 256 against the same model called in-process in
// Python": the numpy network evaluates 256 positions a call, here through
// the socket and shared buffers, there in its own process (printed before
// it serves, one BLAS thread both ways). x-inprocess is the ratio.
func BenchmarkProtocol(b *testing.B) {
	for _, width := range []int{64, 256} {
		b.Run("batch=256/hidden="+strconv.Itoa(width), func(b *testing.B) {
			sock, inproc := pyMLP(b, width)
			d := Dims{ObsDim: 192, Actions: 64, Players: 2, MaxBatch: 256}
			r, err := Dial(context.Background(), sock, d)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			obs, logits, values := make([]float32, 256*192), make([]float32, 256*64), make([]float32, 256*2)
			for i := range obs {
				obs[i] = float32(i%7) / 7
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if err := r.EvaluateBatch(256, obs, logits, values); err != nil {
					b.Fatal(err)
				}
			}
			rate := float64(b.N*256) / time.Since(start).Seconds()
			b.ReportMetric(rate, "positions/s")
			b.ReportMetric(inproc, "inprocess-positions/s")
			b.ReportMetric(rate/inproc, "x-inprocess")
		})
	}
}

// BenchmarkMCTSBatched is issue 32's "MCTS simulations per second with the
// batched evaluator against the built-in model": 64 square8_2p games at
// once on the native rules, 32 simulations a move, one goroutine a game;
// the built-in network (192-64 hidden-64+2) evaluating each leaf as it comes
// ("builtin"), the same network behind the Batcher ("builtin-batched":
// what the batching costs), and the numpy network of that shape through
// the protocol, batched ("python-batched"). One b.N is one game.
func BenchmarkMCTSBatched(b *testing.B) {
	const parallel, sims = 64, 32
	cfg := kinrow.Config{Board: kinrow.Square8, Players: 2}
	probe, err := engine.NewNative(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	meta := probe.Metadata()
	net, err := model.New(model.Shape{ObsDim: meta.Observation.Dim(), Actions: meta.Action.N, Players: 2, Hidden: []int{64}}, 1)
	if err != nil {
		b.Fatal(err)
	}
	d := Dims{ObsDim: meta.Observation.Dim(), Actions: meta.Action.N, Players: 2, MaxBatch: parallel}
	for _, tc := range []struct {
		name string
		eval func(b *testing.B) (engine.Evaluator, *Batcher)
	}{
		{"builtin", func(*testing.B) (engine.Evaluator, *Batcher) { return net, nil }},
		{"builtin-batched", func(*testing.B) (engine.Evaluator, *Batcher) {
			bt := NewBatcher(FromEvaluator(net, d), 0)
			return bt, bt
		}},
		{"python-batched", func(b *testing.B) (engine.Evaluator, *Batcher) {
			if d.ObsDim != 192 || d.Actions != 64 {
				b.Skipf("square8_2p is %d-%d, the numpy network 192-64", d.ObsDim, d.Actions)
			}
			sock, _ := pyMLP(b, 64)
			r, err := Dial(context.Background(), sock, d)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { r.Close() })
			bt := NewBatcher(r, 0)
			return bt, bt
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			eval, bt := tc.eval(b)
			player := &engine.MCTS{Simulations: sims, Eval: eval, DirichletAlpha: 0.3, TempMoves: 6, Native: true}
			var next, moves atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			if bt != nil {
				for range parallel {
					bt.Join() // all before any game starts
				}
			}
			for range parallel {
				wg.Go(func() {
					if bt != nil {
						defer bt.Leave()
					}
					games, err := engine.NewNative(cfg, 1)
					if err != nil {
						b.Error(err)
						return
					}
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						rec, err := engine.PlayGame(context.Background(), games, 0, uint64(i), []engine.Player{player, player}, 0)
						if err != nil {
							b.Error(err)
							return
						}
						moves.Add(int64(len(rec.Moves)))
					}
				})
			}
			wg.Wait()
			el := time.Since(start).Seconds()
			b.ReportMetric(float64(moves.Load()*sims)/el, "sims/s")
			b.ReportMetric(float64(b.N)*3600/el, "games/h")
			if bt != nil {
				n, pos := bt.Stats()
				b.ReportMetric(float64(pos)/float64(max(n, 1)), "positions/batch")
			}
		})
	}
}
