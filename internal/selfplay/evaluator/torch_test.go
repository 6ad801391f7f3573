package evaluator

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/pythontest"
	"github.com/trainyard/trainyard/internal/selfplay"
	"github.com/trainyard/trainyard/internal/selfplay/engine"
	"github.com/trainyard/trainyard/internal/selfplay/npz"
	"github.com/trainyard/trainyard/sdk/go/games/kinrow"
)

// TestPyTorchExampleTrainsAndServes: sdk/python/examples/kinrow_az.py, on
// CPU torch, trains a model directory on an NPZ export of heuristic
// square8_2p games (the platform's format), then serves it, and MCTS games
// searched through the protocol with it finish and record its name.
func TestPyTorchExampleTrainsAndServes(t *testing.T) {
	pythontest.Require(t, "TRAINYARD_REQUIRE_TORCH", "python-torch", "torch", "numpy")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := kinrow.Config{Board: kinrow.Square8, Players: 2}
	games, err := engine.NewNative(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	meta := games.Metadata()
	var recs []selfplay.Game
	for i := range 12 {
		g, err := engine.PlayGame(ctx, games, 0, uint64(i), []engine.Player{engine.Heuristic{}, engine.Heuristic{}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, g)
	}
	ds, err := npz.FromGames(recs, meta.Observation.Shape)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ds.Encode()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "selfplay.npz")
	if err := os.WriteFile(data, b, 0o644); err != nil {
		t.Fatal(err)
	}
	example, _ := filepath.Abs("../../../sdk/python/examples/kinrow_az.py")
	modelDir := filepath.Join(dir, "gen-000001")
	out, err := exec.CommandContext(ctx, pythontest.Python, example, "train", "--data", data, "--out", modelDir, "--steps", "20", "--batch", "64").CombinedOutput()
	if err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	t.Logf("train on %d positions:\n%s", ds.Len(), out)
	for _, f := range []string{"model.pt", "config.json"} {
		if _, err := os.Stat(filepath.Join(modelDir, f)); err != nil {
			t.Fatalf("the model directory lacks %s: %v", f, err)
		}
	}

	sock := filepath.Join(dir, "eval.sock")
	startEvaluator(t, exec.CommandContext(ctx, pythontest.Python, example, "serve", "--model-dir", modelDir, "--socket", sock))
	r, err := Dial(ctx, sock, Dims{ObsDim: meta.Observation.Dim(), Actions: meta.Action.N, Players: 2, MaxBatch: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Model != "gen-000001" {
		t.Errorf("model %q, want the directory's name", r.Model)
	}
	bt := NewBatcher(r, 0)
	player := &engine.MCTS{Simulations: 16, Eval: bt, Model: r.Model, Native: true}
	var wg sync.WaitGroup
	for range 4 {
		bt.Join()
	}
	for i := range 4 {
		wg.Go(func() {
			defer bt.Leave()
			g, err := engine.NewNative(cfg, 1)
			if err != nil {
				t.Error(err)
				return
			}
			rec, err := engine.PlayGame(ctx, g, 0, uint64(100+i), []engine.Player{player, player}, 0)
			if err != nil {
				t.Error(err)
				return
			}
			if len(rec.Moves) == 0 || rec.Model != "gen-000001" {
				t.Errorf("game %d: %d moves, model %q", i, len(rec.Moves), rec.Model)
			}
		})
	}
	wg.Wait()
	n, pos := bt.Stats()
	t.Logf("4 games searched through the PyTorch evaluator: %d positions in %d batches", pos, n)
}

// TestPyTorchExampleSymmetries: the trainer's 8 board symmetries are
// distinct permutations that keep every five in a row (horizontal,
// vertical, both diagonals) a five in a row, and augment moves a state's
// planes and its policy alike, so a move stays on the stone it answers.
func TestPyTorchExampleSymmetries(t *testing.T) {
	pythontest.Require(t, "TRAINYARD_REQUIRE_TORCH", "python-torch", "torch", "numpy")
	const check = `
import sys, numpy as np, torch
sys.path.insert(0, "../../../sdk/python/examples")
import kinrow_az as k
P = k.symmetries(8)
assert P.shape == (8, 64) and len({tuple(p) for p in P}) == 8, P.shape
assert all(sorted(p) == list(range(64)) for p in P)
assert (P[0] == np.arange(64)).all()
def fives(b):
    b = b.reshape(8, 8)
    n = 0
    for y in range(8):
        for x in range(8):
            for dx, dy in ((1, 0), (0, 1), (1, 1), (1, -1)):
                cells = [(x + i*dx, y + i*dy) for i in range(5)]
                if all(0 <= cx < 8 and 0 <= cy < 8 and b[cy, cx] for cx, cy in cells):
                    n += 1
    return n
for line in ([0, 1, 2, 3, 4], [3, 11, 19, 27, 35], [9, 18, 27, 36, 45], [39, 46, 53, 60, 32]):
    b = np.zeros(64); b[line] = 1
    want = fives(b)
    for p in P:
        assert fives(b[p]) == want, (line, p)
rng = np.random.default_rng(1)
x = torch.zeros(16, 3 * 64); pol = torch.zeros(16, 64)
for i in range(16):
    c = int(rng.integers(64)); x[i, c] = 1; x[i, 128:] = 1; x[i, 128 + c] = 0; pol[i, c] = 1
perm = torch.from_numpy(P[rng.integers(0, 8, size=16)])
xa, pa = k.augment(x, pol, 3, perm)
assert (xa.view(16, 3, 64)[:, 0].argmax(1) == pa.argmax(1)).all()
assert (xa.view(16, 3, 64)[:, 2].gather(1, pa.argmax(1, keepdim=True)) == 0).all()
print("ok")
`
	out, err := exec.Command(pythontest.Python, "-c", check).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("kinrow_az.py symmetries: %v\n%s", err, out)
	}
}
