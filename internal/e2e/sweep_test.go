package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/plugintest"
)

type sweepView struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Error    string `json:"error"`
	Progress struct {
		State string `json:"state"`
		Best  int    `json:"best"`
		// Succeeded and friends are the table's tallies.
		Succeeded int   `json:"succeeded"`
		Completed int   `json:"completed"`
		Stopped   int   `json:"stopped"`
		Running   int   `json:"running"`
		Failed    int   `json:"failed"`
		Ranking   []int `json:"ranking"`
		Trials    []struct {
			Index      int            `json:"index"`
			RunID      string         `json:"run_id"`
			Params     map[string]any `json:"params"`
			State      string         `json:"state"`
			Node       string         `json:"node"`
			GPUs       []int          `json:"gpus"`
			Iteration  int64          `json:"iteration"`
			StoppedAt  int64          `json:"stopped_at"`
			MeanReturn float64        `json:"mean_return"`
			Reason     string         `json:"reason"`
			Error      string         `json:"error"`
		} `json:"trials"`
	} `json:"progress"`
}

func waitSweep(t *testing.T, dev *devProc, id string, limit time.Duration, cond func(sweepView) bool) sweepView {
	t.Helper()
	deadline := time.Now().Add(limit)
	var s sweepView
	for time.Now().Before(deadline) {
		if code, _, raw := dev.call("GET", "/v1/sweeps/"+id, dev.admin, nil, &s); code != http.StatusOK {
			t.Fatalf("get sweep: %d %s", code, raw)
		}
		if cond(s) {
			return s
		}
		time.Sleep(500 * time.Millisecond)
	}
	b, _ := json.Marshal(s)
	t.Fatalf("sweep %s: condition not met within %v: %s", id, limit, b)
	return s
}

// sweepLab starts dev with one local node holding one (declared) GPU.
func sweepLab(t *testing.T) *devProc {
	t.Helper()
	dir := t.TempDir()
	dev := startDev(t, dir)
	spec := `
name: lab
defaults:
  provider: local
  provisioner: {kind: local}
nodes:
  - {name: gpu-box, resources: {gpus: "0:GTX 1080 Ti:11GB"}}
`
	if out := cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", spec)); !strings.Contains(out, "TOTAL (1 nodes") {
		t.Fatalf("cluster up: %s", out)
	}
	t.Cleanup(func() { killAgentsOf(dir) })
	return dev
}

// cartPoleLab is sweepLab with the CartPole plugin uploaded.
func cartPoleLab(t *testing.T) *devProc {
	t.Helper()
	wasm := plugintest.BuildGo(t, "./plugins/cartpole")
	dev := sweepLab(t)
	if code, raw := upload(t, dev, dev.admin, wasm, nil); code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, raw)
	}
	return dev
}

// TestSweepGrid is seed 001's tune.grid_search on Trainyard: a grid of
// CartPole PPO trials runs as child runs, at most max_concurrent at once,
// with a results table naming the best. Bad sweeps are refused with the
// field that is wrong.
func TestSweepGrid(t *testing.T) {
	t.Parallel()
	dev := cartPoleLab(t)

	for _, bad := range []struct{ body, loc string }{
		{`{"run":{"cluster":"lab","env":"CartPole-v1"},"grid":{}}`, "body.grid"},
		{`{"run":{"cluster":"lab","env":"CartPole-v1"},"grid":{"learning_rat":[0.1]}}`, "body.grid.learning_rat"},
		{`{"run":{"cluster":"lab","env":"CartPole-v1"},"grid":{"seed":[1.5]}}`, "body.grid.seed"},
		{`{"run":{"cluster":"lab","env":"CartPole-v1"},"grid":{"seed":[1]},"gpus_per_trial":0.5}`, "body.gpus_per_trial"},
	} {
		code, hdr, raw := dev.call("POST", "/v1/sweeps", dev.admin, bad.body, nil)
		if code != http.StatusUnprocessableEntity || !strings.Contains(hdr.Get("Content-Type"), "problem+json") || !strings.Contains(string(raw), bad.loc) {
			t.Errorf("sweep %s: %d %s, want 422 naming %s", bad.body, code, raw, bad.loc)
		}
	}

	// The grid: two learning rates × two seeds, two at a time, through the CLI.
	id := strings.TrimSpace(cli(t, dev, "sweep", "run", "--cluster", "lab", "--env", "CartPole-v1", "--name", "lr-grid",
		"--iterations", "4", "--checkpoint-every", "2", "--envs-per-worker", "4", "--episode-length", "128",
		"--grid", "learning_rate=0.003,0.0003", "--grid", "seed=1,2", "--max-concurrent", "2", "--detach"))
	s := waitSweep(t, dev, id, 4*time.Minute, func(s sweepView) bool { return s.Status != "running" })
	if s.Status != "completed" || s.Progress.Succeeded != 4 || len(s.Progress.Trials) != 4 {
		t.Fatalf("sweep ended %s (%s) with %d of %d trials succeeded", s.Status, s.Error, s.Progress.Succeeded, len(s.Progress.Trials))
	}
	best := 0.0
	for _, tr := range s.Progress.Trials {
		if tr.Iteration != 4 {
			t.Errorf("trial %s stopped at iteration %d, want 4", tr.RunID, tr.Iteration)
		}
		var run runView
		if code, _, raw := dev.call("GET", "/v1/runs/"+tr.RunID, dev.admin, nil, &run); code != http.StatusOK || run.Progress.State != "succeeded" {
			t.Errorf("trial %s as a run: %d %s", tr.RunID, code, raw)
		}
		best = max(best, tr.MeanReturn)
	}
	if b := s.Progress.Best; b < 1 || s.Progress.Trials[b-1].MeanReturn != best {
		t.Errorf("best trial %d, want the one with mean return %.2f", b, best)
	}
	out := cli(t, dev, "sweep", "show", id)
	if !strings.Contains(out, "learning_rate=0.0003 seed=2") || !strings.Contains(out, "4 succeeded") {
		t.Errorf("sweep show:\n%s", out)
	}
	t.Logf("grid sweep:\n%s", out)
	if ls := cli(t, dev, "sweep", "ls"); !strings.Contains(ls, id) || !strings.Contains(ls, "lr-grid") || !strings.Contains(ls, "completed") {
		t.Errorf("sweep ls:\n%s", ls)
	}
	if ls := cli(t, dev, "run", "ls"); strings.Count(ls, "lr-grid") != 4 {
		t.Errorf("run ls lists the trials as runs:\n%s", ls)
	}
}

// TestSweepSharesOneGPU: four command trials with gpus_per_trial 0.25 hold
// one GPU at the same time (each waits until it sees all four marker
// files) and all see CUDA_VISIBLE_DEVICES=0.
func TestSweepSharesOneGPU(t *testing.T) {
	t.Parallel()
	dev := sweepLab(t)
	marks := t.TempDir()
	script := fmt.Sprintf(`echo "$CUDA_VISIBLE_DEVICES" > %[1]s/$0; for i in $(seq 600); do [ $(ls %[1]s | wc -l) -ge 4 ] && exit 0; sleep 0.1; done; exit 1`, marks)
	id := strings.TrimSpace(cli(t, dev, "sweep", "run", "--cluster", "lab", "--gpus-per-trial", "0.25", "--cpus", "0.25",
		"--grid", "trial=a,b,c,d", "--detach", "--", "sh", "-c", script, "{trial}"))
	s := waitSweep(t, dev, id, 3*time.Minute, func(s sweepView) bool { return s.Status != "running" || s.Progress.Failed > 0 })
	if s.Status != "completed" || s.Progress.Succeeded != 4 {
		b, _ := json.Marshal(s)
		t.Fatalf("GPU-sharing sweep: %s", b)
	}
	for _, tr := range s.Progress.Trials {
		v, err := os.ReadFile(filepath.Join(marks, tr.Params["trial"].(string)))
		if err != nil || strings.TrimSpace(string(v)) != "0" || len(tr.GPUs) != 1 || tr.GPUs[0] != 0 {
			t.Errorf("trial %s: CUDA_VISIBLE_DEVICES %q (%v), reserved %v; want GPU 0", tr.RunID, v, err, tr.GPUs)
		}
	}
}
