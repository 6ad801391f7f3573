package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/pythontest"
	"github.com/trainyard/trainyard/workflows/selfplay"
)

// TestSelfplayWithYourModel (issue 32): a square8_2p loop whose model is
// sdk/python/examples/kinrow_az.py on CPU torch, its evaluator and trainer
// given as the loop's model commands, runs 3 generations on a two-node
// cluster: the trainer's model directories land in S3, each candidate plays
// its gauntlet through an evaluator of its own, and once one is promoted
// the self-play games are played by it (and record its name). kill -9 of
// the agent playing generation 2 (the promoted model's games, through its
// evaluator) loses at most one sync interval of games, takes its evaluator
// with it, and the retry on the other node resumes from what S3 holds. A loop whose
// evaluator cannot start stops with the evaluator's own words as its
// reason, not stuck.
//
// Routing (seed 002): on a third cluster of one Tier-1, one Tier-2 and one
// Tier-3 GPU node, a loop whose model commands ask for a GPU each places
// each phase on its own by the policy's tier preferences: your model's
// self-play on Tier 3 (the smallest GPUs that fit the board), training on
// Tier 1, the gauntlet (an evaluator for the best and one for the
// candidate) on Tier 2; every allocation is given back.
func TestSelfplayWithYourModel(t *testing.T) {
	t.Parallel()
	pythontest.Require(t, "TRAINYARD_REQUIRE_TORCH", "python-torch", "torch", "numpy")
	dev, dir := selfplayDev(t)
	example, err := filepath.Abs("../../sdk/python/examples/kinrow_az.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := func(args ...string) string {
		b, _ := json.Marshal(append([]string{pythontest.Python, example}, args...))
		return string(b)
	}
	start := func(cluster, evaluator string) {
		body := fmt.Sprintf(`{"cluster":%q,"config":"square8_2p","settings":{"generations":3,"games_per_generation":48,"simulations":16,"search":"gumbel",
			"eval_games":8,"sync_interval":2000000000,"seed":11,"quality":{"min_games":24,"threshold":0.01},
			"model":{"evaluator":%s,"trainer":%s,"max_batch":64}}}`, cluster, evaluator, cmd("train", "--steps", "60", "--batch", "64"))
		if code, _, raw := dev.call("POST", "/v1/selfplay", dev.admin, body, nil); code != http.StatusCreated {
			t.Fatalf("start loop on %s: %d %s", cluster, code, raw)
		}
	}

	// A model command missing is the request's fault.
	code, hdr, raw := dev.call("POST", "/v1/selfplay", dev.admin, `{"cluster":"lab","config":"square8_2p","settings":{"model":{"evaluator":["python3"],"trainer":[]}}}`, nil)
	assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, "body.settings.model.trainer")

	// A second cluster for the loop whose evaluator dies at once.
	cli(t, dev, "cluster", "up", "-f", writeFile(t, "crash.yaml", "name: crash\ndefaults: {provisioner: {kind: local}}\nnodes: [{name: crash-a}]\n"))
	start("crash", `["sh","-c","echo 'CUDA error: out of memory (pretend)' >&2; exit 3"]`)

	// The tiered cluster's loop, beside the others.
	cli(t, dev, "cluster", "up", "-f", writeFile(t, "tiers.yaml", `name: tiers
defaults: {provider: local, provisioner: {kind: local}}
nodes:
  - {name: tier1, resources: {gpus: [{index: 0, model: H100, vram_mb: 81920}]}}
  - {name: tier2, resources: {gpus: [{index: 1, model: A5000, vram_mb: 24576}, {index: 2, model: A5000, vram_mb: 24576}]}}
  - {name: tier3, resources: {gpus: [{index: 3, model: RTX 4060 Ti, vram_mb: 16384}]}}
`))
	py := pythontest.Python + " " + example
	// A resource the CLI does not know is its error, not the server's.
	bad := exec.Command(binary, "selfplay", "start", "--cluster", "tiers", "--config", "square8_2p", "--evaluator", py+" serve", "--trainer", py+" train",
		"--trainer-resources", "gpus=1,vram=80", "--data-dir", dev.dir)
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), `--trainer-resources: unknown resource "vram"`) {
		t.Fatalf("--trainer-resources gpus=1,vram=80: %v: %s", err, out)
	}
	// A phase no node could ever hold is refused at the start, naming the
	// phase and the setting, not found waiting a generation later: no node
	// of tiers has 4 GPUs for the trainer (self-play and the gauntlet fit).
	never := exec.Command(binary, "selfplay", "start", "--cluster", "tiers", "--config", "square8_2p", "--evaluator", py+" serve", "--trainer", py+" train",
		"--evaluator-resources", "gpus=1", "--trainer-resources", "gpus=4", "--data-dir", dev.dir)
	if out, err := never.CombinedOutput(); err == nil || !strings.Contains(string(out), "training can never be placed") ||
		!strings.Contains(string(out), "model.trainer_resources") || strings.Count(strings.TrimSpace(string(out)), "\n") > 0 {
		t.Fatalf("--trainer-resources gpus=4 on a cluster without a 4-GPU node: %v: %s", err, out)
	}
	cli(t, dev, "selfplay", "start", "--cluster", "tiers", "--config", "square8_2p", "--generations", "2", "--games", "16", "--bootstrap-games", "32", "--min-games", "16",
		"--quality-threshold", "0.01", "--simulations", "8", "--search", "gumbel", "--eval-games", "4", "--sync-interval", "1s", "--seed", "5",
		"--evaluator", py+" serve", "--trainer", py+" train --steps 20 --batch 64", "--max-batch", "64",
		"--evaluator-resources", "gpus=1", "--trainer-resources", "gpus=1")

	began := time.Now()
	start("lab", cmd("serve"))
	id := "lab/square8_2p"
	s3 := s3Client(t, dev, "")
	sp := waitLoop(t, dev, id, 5*time.Minute, func(sp api.Selfplay) bool {
		return sp.Status != "running" || sp.LoopID != "" && sp.State.Generation == 2 && sp.State.Phase == "selfplay"
	})
	// After the first upload, not the third: generation 2's 48 games take
	// a few sync intervals, and with placements no longer one update at a
	// time its phase was often over by the third (the evaluator gone).
	inS3, victim, _ := killPlayer(t, dev, dir, s3, sp.LoopID, id, 2, 1, 2*time.Second, example)
	sp = waitLoop(t, dev, id, 10*time.Minute, func(sp api.Selfplay) bool { return sp.Status != "running" })
	if sp.Status != "completed" || sp.State.Completed != 3 || sp.Settings.Search != "gumbel" {
		t.Fatalf("loop: status %s phase %s (%s), %d completed, error %s", sp.Status, sp.State.Phase, sp.State.Reason, sp.State.Completed, sp.Error)
	}
	t.Logf("3 generations with kinrow_az.py as the model, Gumbel root search, a kill -9 in generation 2, in %v", time.Since(began).Round(time.Second))
	g2 := sp.State.Generations[1]
	if g2.Attempts < 2 || len(g2.Resumed) == 0 || g2.Resumed[0] != len(inS3) || g2.Node == victim {
		t.Fatalf("generation 2 after its player's kill: %d attempts on %s resumed from %v; want a retry off %s from %d games", g2.Attempts, g2.Node, g2.Resumed, victim, len(inS3))
	}
	for _, b := range readBatches(t, dev, s3, selfplay.GamesPrefix(sp.LoopID, 2), 2) {
		for _, i := range b.indexes {
			if inS3[i] {
				t.Fatalf("the retry played game %d of generation 2 again", i)
			}
		}
	}
	t.Logf("generation 2's retry on %s resumed from the %d games in S3 at the kill and played none of them again", g2.Node, g2.Resumed[0])
	promoted := ""
	for _, g := range sp.State.Generations {
		t.Logf("generation %d: %s, %d games by %s (evaluator batches of %.1f), %d positions, candidate %s (%s), gauntlet %+v",
			g.N, g.State, g.Games, g.Players, g.EvalBatch, g.Positions, g.Model, g.ModelKey, g.Gauntlet)
		if !strings.HasPrefix(g.ModelKey, "modeldir:") || len(g.Gauntlet) < 2 {
			t.Fatalf("generation %d: candidate %q is not a model directory, or no gauntlet: %+v", g.N, g.ModelKey, g)
		}
		// The trainer's directory is in S3: its manifest, and the files
		// kinrow_az.py writes.
		run, seqS, _ := strings.Cut(strings.TrimPrefix(g.ModelKey, "modeldir:"), "/")
		seq, _ := strconv.Atoi(seqS)
		key := fmt.Sprintf("%s/modeldirs/runs/%s/%010d/manifest.json", sp.LoopID, run, seq)
		obj, err := s3.GetObject(t.Context(), dev.ep.Bucket, key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Files []struct {
				Path string `json:"path"`
			} `json:"files"`
		}
		if err := json.NewDecoder(obj).Decode(&m); err != nil || len(m.Files) != 2 {
			t.Fatalf("model directory %s: %+v, %v; want config.json and model.pt", key, m, err)
		}
		// A generation's batch size is its last attempt's: the retry after
		// the kill plays only the games not yet in S3, a handful when the
		// games ended together.
		minBatch := 2.0
		if g.N == 2 && 48-len(inS3) < 4 {
			minBatch = 1
		}
		if promoted != "" && (g.Players != "mcts:"+promoted || g.EvalBatch < minBatch) {
			t.Fatalf("generation %d played by %q (evaluator batches of %.1f) after %s was promoted: want its model, batched", g.N, g.Players, g.EvalBatch, promoted)
		}
		if g.Promoted {
			promoted = g.Model
		}
	}
	if promoted == "" {
		t.Logf("no candidate was promoted in 3 generations: self-play stayed with the heuristic")
	}

	tl := waitLoop(t, dev, "tiers/square8_2p", 5*time.Minute, func(sp api.Selfplay) bool { return sp.Status != "running" })
	if tl.Status != "completed" || len(tl.State.Generations) != 2 {
		t.Fatalf("tiered loop: %s (%s: %s) %s", tl.Status, tl.State.Phase, tl.State.Reason, tl.Error)
	}
	for _, g := range tl.State.Generations {
		t.Logf("tiered generation %d: played by %s on %s, trained on %s, gauntlet on %s", g.N, g.Players, g.Node, g.TrainNode, g.GauntletNode)
		games := map[int]int{1: 32, 2: 16}[g.N] // --bootstrap-games 32 for the heuristic's generation
		if g.Games != games {
			t.Fatalf("tiered generation %d played %d games, want %d", g.N, g.Games, games)
		}
		if g.TrainNode != "tier1" || g.GauntletNode != "tier2" || g.N == 2 && (!strings.HasPrefix(g.Players, "mcts:") || g.Node != "tier3") {
			t.Fatalf("tiered generation %d: self-play by %s on %s, training on %s, gauntlet on %s; want your model's self-play on tier3, training on tier1, the gauntlet on tier2",
				g.N, g.Players, g.Node, g.TrainNode, g.GauntletNode)
		}
	}
	if out := cli(t, dev, "selfplay", "show", "tiers/square8_2p"); !strings.Contains(out, "play@tier3 train@tier1 gauntlet@tier2") {
		t.Fatalf("selfplay show does not say where the phases ran:\n%s", out)
	}
	var ts clusterStatus
	dev.call("GET", "/v1/clusters/tiers", dev.admin, nil, &ts)
	if ts.Totals.GPUsUsed != 0 {
		t.Fatalf("the tiered loop's allocations are not all given back: %d GPUs in use", ts.Totals.GPUsUsed)
	}

	crash := waitLoop(t, dev, "crash/square8_2p", 5*time.Minute, func(sp api.Selfplay) bool { return sp.Status != "running" })
	why := crash.Error + " " + crash.State.Reason
	if crash.Status != "failed" || !strings.Contains(why, "model.evaluator") || !strings.Contains(why, "out of memory (pretend)") {
		t.Fatalf("loop with a crashing evaluator: status %s, error %q, reason %q", crash.Status, crash.Error, crash.State.Reason)
	}
	if out := cli(t, dev, "selfplay", "show", "crash/square8_2p"); !strings.Contains(out, "out of memory (pretend)") {
		t.Fatalf("selfplay show does not say why the loop failed:\n%s", out)
	}
	t.Logf("crashing evaluator: %s", crash.Error)
}
