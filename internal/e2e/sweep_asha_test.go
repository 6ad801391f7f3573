package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/plugintest"
)

// TestSweepASHA is Ray Tune's ASHA on Trainyard: a random search of 8
// CartPole trials (learning rates log-uniform over 1e-5..3e-3, so some
// cannot learn in the budget, and random seeds), 2 at a time, under ASHA
// (grace 10, factor 3: rungs 10, 30, 90, 270 below max_t 400). Trials report
// every segment (checkpoint_every 10, one per rung); the scheduler stops
// the weak ones, whose runs end stopped with the rung and why, and a
// trial solves CartPole (mean return ≥ 475). Bad random/scheduler fields
// are refused with the field that is wrong.
func TestSweepASHA(t *testing.T) {
	t.Parallel()
	wasm := plugintest.BuildGo(t, "./plugins/cartpole")
	dev := sweepLab(t)
	if code, raw := upload(t, dev, dev.admin, wasm, nil); code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, raw)
	}
	const run = `"run":{"cluster":"lab","env":"CartPole-v1"}`
	for _, bad := range []struct{ body, loc string }{
		{`{` + run + `,"search":"random","num_samples":4}`, "body.param_space"},
		{`{` + run + `,"search":"random","param_space":{"learning_rate":{"kind":"loguniform","min":0,"max":1}},"num_samples":4}`, "body.param_space.learning_rate"},
		{`{` + run + `,"search":"random","param_space":{"learning_rat":{"kind":"uniform","min":0,"max":1}},"num_samples":4}`, "body.param_space.learning_rat"},
		{`{` + run + `,"search":"random","param_space":{"gamma":{"kind":"uniform","min":0.9,"max":0.99}}}`, "body.num_samples"},
		{`{` + run + `,"param_space":{"gamma":{"kind":"uniform","min":0.9,"max":0.99}},"num_samples":2}`, "body.param_space"},
		{`{` + run + `,"grid":{"seed":[1,2]},"scheduler":{"type":"hyperband"}}`, "body.scheduler.type"},
		{`{` + run + `,"grid":{"seed":[1,2]},"scheduler":{"type":"asha","metric":"reward"}}`, "body.scheduler.metric"},
		{`{` + run + `,"grid":{"seed":[1,2]},"scheduler":{"type":"asha","grace_period":50,"max_t":20}}`, "body.scheduler.grace_period"},
		{`{` + run + `,"grid":{"seed":[1,2]},"scheduler":{"type":"median","reduction_factor":3}}`, "body.scheduler.reduction_factor"},
	} {
		code, hdr, raw := dev.call("POST", "/v1/sweeps", dev.admin, bad.body, nil)
		if code != http.StatusUnprocessableEntity || !strings.Contains(hdr.Get("Content-Type"), "problem+json") || !strings.Contains(string(raw), `"`+bad.loc+`"`) {
			t.Errorf("sweep %s: %d %s, want 422 naming %s", bad.body, code, raw, bad.loc)
		}
	}

	start := time.Now()
	id := strings.TrimSpace(cli(t, dev, "sweep", "run", "--cluster", "lab", "--env", "CartPole-v1", "--name", "asha",
		"--param", "learning_rate=loguniform:1e-5:3e-3", "--param", "seed=randint:1:100", "--samples", "8", "--search-seed", "1",
		"--scheduler", "asha", "--grace-period", "10", "--max-t", "400", "--checkpoint-every", "10",
		"--target-return", "475", "--max-concurrent", "2", "--detach"))
	s := waitSweep(t, dev, id, 20*time.Minute, func(s sweepView) bool { return s.Status != "running" })
	out := cli(t, dev, "sweep", "show", id)
	t.Logf("ASHA sweep in %v:\n%s", time.Since(start).Round(time.Second), out)
	p := s.Progress
	if s.Status != "completed" || len(p.Trials) != 8 || p.Failed != 0 {
		t.Fatalf("sweep ended %s (%s): %d trials, %d failed", s.Status, s.Error, len(p.Trials), p.Failed)
	}
	if p.Stopped < 4 {
		t.Errorf("%d of 8 trials stopped early, want at least half", p.Stopped)
	}
	for _, tr := range p.Trials {
		if tr.State != "stopped" {
			continue
		}
		if tr.StoppedAt != 10 && tr.StoppedAt != 30 && tr.StoppedAt != 90 && tr.StoppedAt != 270 || !strings.HasPrefix(tr.Reason, "stopped by asha at rung ") || tr.Iteration >= 400 {
			t.Errorf("stopped trial %s: at %d after %d iterations, reason %q", tr.RunID, tr.StoppedAt, tr.Iteration, tr.Reason)
		}
		var r runView
		if code, _, raw := dev.call("GET", "/v1/runs/"+tr.RunID, dev.admin, nil, &r); code != http.StatusOK || r.Progress.State != "stopped" || r.Progress.Reason != tr.Reason {
			t.Errorf("stopped trial %s as a run: %d %s", tr.RunID, code, raw)
		}
	}
	if p.Best < 1 || p.Ranking[0] != p.Best {
		t.Fatalf("best %d, ranking %v", p.Best, p.Ranking)
	}
	best := p.Trials[p.Best-1]
	if best.State != "succeeded" || best.MeanReturn < 475 {
		t.Errorf("best trial %s: %s at mean return %.1f, want succeeded at ≥ 475", best.RunID, best.State, best.MeanReturn)
	}
	if !strings.Contains(out, "stopped by asha at rung") {
		t.Errorf("sweep show lacks the stopped trials:\n%s", out)
	}
}
