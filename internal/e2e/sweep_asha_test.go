package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSweepASHA is Ray Tune's ASHA on Trainyard: a random search of 8
// CartPole trials (learning rates log-uniform over 1e-5..3e-3, so some
// cannot learn in the budget, and random seeds), 2 at a time, under ASHA
// (grace 10, factor 3: rungs 10 and 30 below max_t 90). Trials report every
// segment (checkpoint_every 10, one per rung); the scheduler stops the weak
// ones, whose runs end stopped with the rung and why, and the best one runs
// its 90 iterations. Bad random/scheduler fields are refused with the field
// that is wrong. TestLearnSweepASHASolvesCartPole (make learn) runs the
// same search to max_t 400 until a trial solves CartPole.
func TestSweepASHA(t *testing.T) {
	t.Parallel()
	dev := cartPoleLab(t)
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

	ashaSweep(t, dev, 90, 0)
}

// TestLearnSweepASHASolvesCartPole: the ASHA search of TestSweepASHA to
// max_t 400 (rungs 10, 30, 90, 270) with target_return 475: one trial
// solves CartPole, the weak ones stop early. About 3 minutes; make learn.
func TestLearnSweepASHASolvesCartPole(t *testing.T) {
	t.Parallel()
	dev := cartPoleLab(t)
	ashaSweep(t, dev, 400, 475)
}

// ashaSweep runs 8 random trials under ASHA (grace 10, factor 3) to maxT
// iterations, target the return that ends a trial early as solved (0:
// none), and checks the rungs, the stop reasons and the best trial.
func ashaSweep(t *testing.T, dev *devProc, maxT int, target float64) {
	t.Helper()
	args := []string{"sweep", "run", "--cluster", "lab", "--env", "CartPole-v1", "--name", "asha",
		"--param", "learning_rate=loguniform:1e-5:3e-3", "--param", "seed=randint:1:100", "--samples", "8", "--search-seed", "1",
		"--scheduler", "asha", "--grace-period", "10", "--max-t", strconv.Itoa(maxT), "--checkpoint-every", "10",
		"--max-concurrent", "2", "--detach"}
	if target > 0 {
		args = append(args, "--target-return", fmt.Sprint(target))
	}
	rungs := map[int64]bool{}
	for r := int64(10); r < int64(maxT); r *= 3 {
		rungs[r] = true
	}
	start := time.Now()
	id := strings.TrimSpace(cli(t, dev, args...))
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
		if !rungs[tr.StoppedAt] || !strings.HasPrefix(tr.Reason, "stopped by asha at rung ") || tr.Iteration >= int64(maxT) {
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
	switch {
	case target > 0 && (best.State != "succeeded" || best.MeanReturn < target):
		t.Errorf("best trial %s: %s at mean return %.1f, want succeeded at ≥ %v", best.RunID, best.State, best.MeanReturn, target)
	case target == 0 && (best.State == "stopped" || best.Iteration != int64(maxT)):
		t.Errorf("best trial %s: %s after %d iterations, want all %d", best.RunID, best.State, best.Iteration, maxT)
	}
	if !strings.Contains(out, "stopped by asha at rung") {
		t.Errorf("sweep show lacks the stopped trials:\n%s", out)
	}
}
