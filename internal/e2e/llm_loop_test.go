package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/inference/inferencetest"
	"github.com/trainyard/trainyard/internal/pythontest"
	"github.com/trainyard/trainyard/plugins/arithmetic/model"
)

// loopRun is what the loop test reads of a kind llm run.
type loopRun struct {
	Status   string `json:"status"`
	Error    string `json:"error"`
	Progress struct {
		State          string `json:"state"`
		Reason         string `json:"reason"`
		Node           string `json:"node"`
		Failures       int    `json:"failures"`
		LastFailure    string `json:"last_failure"`
		Checkpoint     int64  `json:"checkpoint"`
		RolloutWorkers []struct {
			State       string `json:"state"`
			Node        string `json:"node"`
			Placements  int    `json:"placements"`
			Failures    int    `json:"failures"`
			LastFailure string `json:"last_failure"`
		} `json:"rollout_workers"`
		Loop *loopStatus `json:"loop"`
	} `json:"progress"`
	Loop *struct {
		Trainer *loopStatus `json:"trainer"`
		Workers []struct {
			Worker   int    `json:"worker"`
			Node     string `json:"node"`
			Episodes int64  `json:"episodes"`
			Skipped  int64  `json:"skipped"`
		} `json:"workers"`
	} `json:"loop"`
}

type loopStatus struct {
	Step     int64 `json:"step"`
	Restored int64 `json:"restored"`
	Pool     struct {
		Put        int64   `json:"put"`
		Duplicates int64   `json:"duplicates"`
		Lag        []int64 `json:"lag"`
	} `json:"pool"`
	Endpoints []struct {
		Name    string `json:"name"`
		Version int64  `json:"version"`
	} `json:"endpoints"`
}

// TestLLMLoopSurvivesKills is the LLM-RL loop (kind llm) end to end: an
// OpenAI-compatible server on loopback serves the arithmetic model (50 ms
// per answer); two rollout workers play the arithmetic env against it,
// 100 episodes each at once; the arithmetic trainer (standard-library
// Python, trainer protocol v1) learns from the pool's batches to make the
// model work problems out; every step is published and the server loads
// it. Midway a rollout worker's agent and then the trainer's agent are
// kill -9ed, then `trainyard dev` itself. The loop reaches its last step; the final weights learnt
// from steps × batch distinct episodes (none twice), none that a worker
// finished long before a trained one is missing (none lost), the server
// loaded every published version in order, and the trajectories carried
// the versions that made them.
func TestLLMLoopSurvivesKills(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a loop of 80 steps through kills of two agents and of dev")
	}
	const steps, batch, concurrency, workers = 80, 32, 100, 2
	srv := inferencetest.Start(t, "arith-1b")
	srv.SetLatency(50 * time.Millisecond)
	llm := model.New(1)
	srv.Answer = func(msgs []inference.ChatMessage) string { return llm.Answer(msgs[len(msgs)-1].Content) }
	var api, token, runID atomic.Value
	srv.OnReload = func(rl inferencetest.Reload) error {
		b, err := downloadFile(api.Load().(string), token.Load().(string), runID.Load().(string), rl.Version, "policy.json")
		if err != nil {
			return err
		}
		return llm.Load(b)
	}
	dev, restart := crashableLab(t, t.TempDir(), fmt.Sprintf(`
name: lab
defaults: {provider: local, provisioner: {kind: local}}
nodes: [{name: node-a}, {name: node-b}, {name: node-c}, {name: node-d}]
endpoints:
  - {name: llm, url: %q, model: arith-1b, max_concurrency: 400, type: webhook, reload_url: %q}
`, srv.URL, srv.URL+"/admin/reload"), 4)
	api.Store(dev.ep.API)
	token.Store(dev.admin)
	trainer, err := filepath.Abs("../../plugins/arithmetic/trainer/train.py")
	if err != nil {
		t.Fatal(err)
	}
	spec := writeFile(t, "loop.yaml", fmt.Sprintf(`
name: arith-loop
cluster: lab
env: arithmetic
capabilities: {http: [llm]}
rollout_workers: %d
cpus: 0.5
rollout_cpus: 0.5
seed: 5
command: [%s, %s, --min-step-seconds, "0.5"]
llm: {steps: %d, batch: %d, max_concurrency: %d, pool_capacity: 128}
`, workers, pythontest.Python, trainer, steps, batch, concurrency))
	id := strings.TrimSpace(cli(t, dev, "run", "llm", "-f", spec, "--detach"))
	runID.Store(id)
	get := func() loopRun {
		var r loopRun
		if code, _, raw := dev.call("GET", "/v1/runs/"+id, dev.admin, nil, &r); code != 200 {
			t.Fatalf("get run: %d %s", code, raw)
		}
		if r.Status != "running" && r.Progress.State != "succeeded" {
			t.Fatalf("loop ended %s: %s %s", r.Status, r.Error, r.Progress.Reason)
		}
		return r
	}
	wait := func(what string, cond func(loopRun) bool) loopRun {
		t.Helper()
		deadline := time.Now().Add(4 * time.Minute)
		for {
			r := get()
			if cond(r) {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 4m: %+v", what, r.Progress)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	step := func(r loopRun) int64 {
		if r.Loop != nil && r.Loop.Trainer != nil {
			return r.Loop.Trainer.Step
		}
		return 0
	}

	// Live: the trainer's and both workers' heartbeats, on three nodes.
	r := wait("all roles running and step 5", func(r loopRun) bool {
		return step(r) >= 5 && len(r.Loop.Workers) == workers && len(r.Progress.RolloutWorkers) == workers && r.Progress.RolloutWorkers[0].Node != ""
	})
	trainerNode, victim := r.Progress.Node, r.Progress.RolloutWorkers[0].Node
	if victim == trainerNode {
		victim = r.Progress.RolloutWorkers[1].Node
	}
	t.Logf("step %d: trainer on %s, workers on %s and %s; killing the agent of %s", step(r), trainerNode, r.Progress.RolloutWorkers[0].Node, r.Progress.RolloutWorkers[1].Node, victim)
	if out := cli(t, dev, "run", "show", id); !strings.Contains(out, "off-policy lag") || !strings.Contains(out, "endpoint llm") || !strings.Contains(out, "trajectories/s") {
		t.Fatalf("run show lacks the loop:\n%s", out)
	}
	killNodeAgent(t, dev, victim)
	r = wait("the rollout worker placed again", func(r loopRun) bool {
		for _, w := range r.Progress.RolloutWorkers {
			if w.Failures > 0 && w.Node != "" && w.Node != victim && w.State == "running" {
				return true
			}
		}
		return false
	})
	if r.Progress.Node == victim {
		t.Fatalf("the trainer was on the killed node %s too", victim)
	}
	t.Logf("step %d: the worker is back; killing the trainer's agent on %s", step(r), r.Progress.Node)
	killNodeAgent(t, dev, r.Progress.Node)
	r = wait("the trainer restored", func(r loopRun) bool { return r.Loop != nil && r.Loop.Trainer != nil && r.Loop.Trainer.Restored > 0 })
	t.Logf("step %d: the trainer is back from checkpoint %d; kill -9 of trainyard dev", step(r), r.Loop.Trainer.Restored)
	if r.Status != "running" {
		t.Fatalf("the loop ended (%s at step %d) before the kill of dev: raise steps", r.Status, step(r))
	}
	dev.kill(syscall.SIGKILL)
	dev = restart()
	r = wait("the loop's end", func(r loopRun) bool { return r.Status == "completed" })
	final := r.Progress.Loop
	t.Logf("ended: %d trainer failures, final %+v, workers %+v", r.Progress.Failures, final, r.Progress.RolloutWorkers)
	if r.Progress.State != "succeeded" || final == nil || final.Step != steps || r.Progress.Failures < 1 || final.Restored == 0 {
		t.Fatalf("want a loop that lost its trainer once, restored it from a checkpoint and reached step %d: %+v", steps, r.Progress)
	}

	// The weights the endpoint serves: what the last step published.
	raw, err := downloadFile(dev.ep.API, dev.admin, id, r.Progress.Checkpoint, "policy.json")
	if err != nil {
		t.Fatal(err)
	}
	var policy struct {
		Logit    float64          `json:"logit"`
		Episodes []int64          `json:"episodes"`
		Versions map[string]int64 `json:"versions"`
	}
	if err := json.Unmarshal(raw, &policy); err != nil {
		t.Fatal(err)
	}
	// None twice.
	trained := map[int64]bool{}
	for _, e := range policy.Episodes {
		if trained[e] {
			t.Fatalf("episode %d trained on twice", e)
		}
		trained[e] = true
	}
	if len(trained) != steps*batch {
		t.Fatalf("%d episodes trained on, want %d", len(trained), steps*batch)
	}
	// None lost: the episodes the final checkpoint counts as settled (its
	// ledger, carried across the trainer's restart) are exactly those its
	// weights learnt from; an episode the pool took but lost with the
	// killed trainer would be settled and untrained, and one a killed
	// worker lost was never accepted, so its successor played it again.
	var cps struct {
		Checkpoints []struct {
			Seq    int64             `json:"seq"`
			Labels map[string]string `json:"labels"`
		} `json:"checkpoints"`
	}
	if code, _, raw := dev.call("GET", "/v1/runs/"+id+"/checkpoints", dev.admin, nil, &cps); code != 200 || len(cps.Checkpoints) == 0 {
		t.Fatalf("checkpoints: %d %s", code, raw)
	}
	last := cps.Checkpoints[len(cps.Checkpoints)-1]
	var ranges [][2]int64
	if err := json.Unmarshal([]byte(last.Labels["loop_episodes"]), &ranges); err != nil || last.Seq != r.Progress.Checkpoint {
		t.Fatalf("checkpoint %d's ledger %q: %v", last.Seq, last.Labels["loop_episodes"], err)
	}
	settled := map[int64]bool{}
	for _, x := range ranges {
		for e := x[0]; e <= x[1]; e++ {
			settled[e] = true
		}
	}
	for e := range settled {
		if !trained[e] {
			t.Fatalf("episode %d is settled in checkpoint %d but its weights never learnt from it", e, last.Seq)
		}
	}
	if len(settled) != len(trained) {
		t.Fatalf("checkpoint %d settles %d episodes; its weights learnt from %d", last.Seq, len(settled), len(trained))
	}
	// Episodes still being played or pooled at the end leave gaps below
	// each worker's newest trained one: at most its concurrency plus the
	// pool's capacity.
	for w := range int64(workers) {
		var newest int64 = -1
		for e := range trained {
			if e%workers == w {
				newest = max(newest, e)
			}
		}
		gaps := 0
		for e := w; e < newest; e += workers {
			if !trained[e] {
				gaps++
			}
		}
		t.Logf("worker %d: newest trained episode %d, %d below it not trained (in flight or pooled at the end)", w, newest, gaps)
		if gaps > concurrency+128 {
			t.Errorf("worker %d: %d episodes below %d never trained on", w, gaps, newest)
		}
	}
	// Every version loaded in order; the trajectories carry theirs.
	reloads := srv.Reloads()
	for i := 1; i < len(reloads); i++ {
		if reloads[i].Version <= reloads[i-1].Version {
			t.Fatalf("reloads out of order: %+v", reloads)
		}
	}
	if srv.Version() != r.Progress.Checkpoint || len(final.Endpoints) != 1 || final.Endpoints[0].Version != srv.Version() {
		t.Fatalf("the endpoint serves v%d; the loop published v%d and reports %+v", srv.Version(), r.Progress.Checkpoint, final.Endpoints)
	}
	var fromPublished int64
	for v, n := range policy.Versions {
		x, _ := strconv.ParseInt(v, 10, 64)
		if x > r.Progress.Checkpoint {
			t.Fatalf("a trajectory claims weights v%d, newer than any published (v%d)", x, r.Progress.Checkpoint)
		}
		if x > 0 {
			fromPublished += n
		}
	}
	if fromPublished < steps*batch/2 || llm.PWork() < 0.9 {
		t.Fatalf("trajectories by weight version %v; the model works problems out with p %.3f", policy.Versions, llm.PWork())
	}
	t.Logf("learnt p(work it out) %.3f; trajectories by weight version %v; %d reloads", llm.PWork(), policy.Versions, len(reloads))
}

// downloadFile fetches one file of a run's checkpoint through the API.
func downloadFile(api, token, run string, seq int64, file string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/runs/%s/checkpoints/%d/files/%s", api, run, seq, file), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("checkpoint %d of %s: HTTP %d: %s", seq, run, res.StatusCode, b)
	}
	return b, err
}
