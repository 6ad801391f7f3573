package sweep

import (
	"slices"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/learner"
)

// at is one iteration of a trial's report with mean_return v.
func at(it int64, v float64) learner.Metrics {
	return learner.Metrics{Iteration: it, RecentReturnMean: v, RecentEpisodes: 10}
}

// step is one report in the order the sweep receives it.
type step struct {
	trial int
	ms    []learner.Metrics
	stop  string // "" goes on; else a substring of the reason
}

func TestRungs(t *testing.T) {
	for _, tc := range []struct {
		s    Scheduler
		want []int64
	}{
		{Scheduler{GracePeriod: 5, ReductionFactor: 3, MaxT: 100}, []int64{5, 15, 45}},
		{Scheduler{GracePeriod: 1, ReductionFactor: 3, MaxT: 10}, []int64{1, 3, 9}},
		{Scheduler{GracePeriod: 1, ReductionFactor: 3, MaxT: 9}, []int64{1, 3}},
		{Scheduler{GracePeriod: 10, ReductionFactor: 2, MaxT: 50}, []int64{10, 20, 40}},
		{Scheduler{GracePeriod: 4, ReductionFactor: 2.5, MaxT: 60}, []int64{4, 10, 25}},
		{Scheduler{GracePeriod: 10, ReductionFactor: 3, MaxT: 10}, nil},
	} {
		if got := tc.s.Rungs(); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: rungs %v, want %v", tc.s, got, tc.want)
		}
	}
}

// TestASHADecisions: a trial reaching a rung goes on only when it is not
// below the (1 - 1/reduction_factor) quantile of the values recorded there
// before it (numpy's linear percentile); the first at a rung always goes
// on; every rung judges a trial once.
func TestASHADecisions(t *testing.T) {
	asha := Scheduler{Type: SchedulerASHA, Metric: "mean_return", Mode: "max", GracePeriod: 5, ReductionFactor: 3, MaxT: 50}
	for _, tc := range []struct {
		name  string
		s     Scheduler
		steps []step
	}{
		{"first at a rung goes on", asha, []step{
			{1, []learner.Metrics{at(5, 10)}, ""},
		}},
		{"below the cutoff stops", asha, []step{
			{1, []learner.Metrics{at(5, 100)}, ""},
			{2, []learner.Metrics{at(5, 50)}, "stopped by asha at rung 5 (mean_return 50.0 < cutoff 100.0 of 1 trials)"},
		}},
		{"top third of three goes on, the rest stop", asha, []step{
			{1, []learner.Metrics{at(5, 10)}, ""},
			{2, []learner.Metrics{at(5, 40)}, ""}, // cutoff 10
			// recorded 10, 40: 2/3 percentile = 10 + (2/3)(30) = 30
			{3, []learner.Metrics{at(5, 29)}, "mean_return 29.0 < cutoff 30.0"},
			{4, []learner.Metrics{at(5, 35)}, ""}, // recorded 10, 40, 29: cutoff 29 + (1/3)(11)… 33.3
		}},
		{"a report spanning a rung is judged at the rung's iteration", asha, []step{
			{1, []learner.Metrics{at(1, 0), at(2, 0), at(3, 50), at(4, 60), at(5, 70), at(6, 80)}, ""},
			{2, []learner.Metrics{at(4, 90), at(5, 20), at(6, 99)}, "rung 5 (mean_return 20.0 < cutoff 70.0"},
		}},
		{"second rung compares with those that reached it", asha, []step{
			{1, []learner.Metrics{at(5, 10), at(15, 100)}, ""},
			{2, []learner.Metrics{at(5, 20)}, ""},
			{2, []learner.Metrics{at(15, 90)}, "rung 15 (mean_return 90.0 < cutoff 100.0"},
		}},
		{"a rung judges once; repeats after a restore are skipped", asha, []step{
			{1, []learner.Metrics{at(5, 100)}, ""},
			{2, []learner.Metrics{at(5, 100), at(6, 1)}, ""},
			{2, []learner.Metrics{at(5, 1), at(7, 1)}, ""},
		}},
		{"no value yet: judged at its first iteration with one", asha, []step{
			{1, []learner.Metrics{at(5, 100)}, ""},
			{2, []learner.Metrics{{Iteration: 5}, {Iteration: 6}, at(7, 3)}, "rung 5 (mean_return 3.0 < cutoff 100.0"},
		}},
		{"min mode stops the highest", Scheduler{Type: SchedulerASHA, Metric: "episode_length_mean", Mode: "min", GracePeriod: 2, ReductionFactor: 2, MaxT: 10}, []step{
			{1, []learner.Metrics{{Iteration: 2, Episodes: 1, EpisodeLengthMean: 30}}, ""},
			{2, []learner.Metrics{{Iteration: 2, Episodes: 1, EpisodeLengthMean: 20}}, ""},
			{3, []learner.Metrics{{Iteration: 2, Episodes: 1, EpisodeLengthMean: 26}}, "episode_length_mean 26.0 > cutoff 25.0"},
		}},
		{"median: too few others goes on", Scheduler{Type: SchedulerMedian, Metric: "mean_return", Mode: "max", GracePeriod: 3, MinSamples: 2}, []step{
			{1, []learner.Metrics{at(1, 50), at(2, 50), at(3, 50)}, ""},
			{2, []learner.Metrics{at(1, 1), at(2, 1), at(3, 1)}, ""},
		}},
		{"median: best below the others' running means' median stops", Scheduler{Type: SchedulerMedian, Metric: "mean_return", Mode: "max", GracePeriod: 3, MinSamples: 2}, []step{
			{1, []learner.Metrics{at(1, 10), at(2, 20), at(3, 30), at(4, 100)}, ""}, // running mean at 3: 20
			{2, []learner.Metrics{at(1, 30), at(2, 40), at(3, 50)}, ""},             // running mean at 3: 40
			// others at 3: 20 and 40, median 30; best so far 25
			{3, []learner.Metrics{at(1, 25), at(2, 5)}, ""},
			{3, []learner.Metrics{at(3, 5)}, "stopped by median at iteration 3 (best mean_return 25.0 < median 30.0 of 2 trials)"},
		}},
		{"median: before the grace period nothing stops", Scheduler{Type: SchedulerMedian, Metric: "mean_return", Mode: "max", GracePeriod: 3, MinSamples: 1}, []step{
			{1, []learner.Metrics{at(1, 100), at(2, 100), at(3, 100)}, ""},
			{2, []learner.Metrics{at(1, 0), at(2, 0)}, ""},
			{2, []learner.Metrics{at(3, 0)}, "median at iteration 3"},
		}},
		{"median: only others that reached the iteration count", Scheduler{Type: SchedulerMedian, Metric: "mean_return", Mode: "max", GracePeriod: 1, MinSamples: 1}, []step{
			{1, []learner.Metrics{at(1, 100)}, ""},
			{2, []learner.Metrics{at(1, 0)}, "median 100.0 of 1 trials"},
			{3, []learner.Metrics{at(1, 200), at(2, 0)}, ""}, // at 2 nobody else has been
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStopper(tc.s)
			for i, s := range tc.steps {
				d, stop := st.observe(s.trial, s.ms)
				switch {
				case s.stop == "" && stop:
					t.Fatalf("step %d (trial %d): stopped (%s), want it to go on", i, s.trial, d.Reason)
				case s.stop != "" && !stop:
					t.Fatalf("step %d (trial %d): goes on, want a stop with %q", i, s.trial, s.stop)
				case stop && !strings.Contains(d.Reason, s.stop):
					t.Fatalf("step %d (trial %d): reason %q, want %q in it", i, s.trial, d.Reason, s.stop)
				}
			}
		})
	}
}

func TestSchedulerCheck(t *testing.T) {
	for _, tc := range []struct {
		s        Scheduler
		field    string   // "" is valid
		policies []string // the base run's
	}{
		{s: Scheduler{Type: "asha"}},
		// One policy's return in a multi-agent run: a policy it has (the
		// default one when it names none), a return metric.
		{s: Scheduler{Type: "asha", Metric: "policy/learner/recent_return_mean"}, policies: []string{"learner", "tft"}},
		{s: Scheduler{Type: "asha", Metric: "policy/shared/episode_return_mean"}},
		{s: Scheduler{Type: "asha", Metric: "policy/ghost/recent_return_mean"}, field: "scheduler.metric", policies: []string{"learner", "tft"}},
		{s: Scheduler{Type: "asha", Metric: "policy/learner/policy_loss"}, field: "scheduler.metric", policies: []string{"learner"}},
		{s: Scheduler{Type: "asha", Metric: "policy/../recent_return_mean"}, field: "scheduler.metric", policies: nil},
		{s: Scheduler{Type: "asha", Metric: "policy/learner"}, field: "scheduler.metric", policies: []string{"learner"}},
		{s: Scheduler{Type: "median", MinSamples: 2, GracePeriod: 4, Mode: "min", Metric: "episode_return_mean"}},
		{s: Scheduler{Type: "hyperband"}, field: "scheduler.type"},
		{s: Scheduler{Type: "asha", Metric: "reward"}, field: "scheduler.metric"},
		{s: Scheduler{Type: "asha", Mode: "maximize"}, field: "scheduler.mode"},
		{s: Scheduler{Type: "asha", ReductionFactor: 1}, field: "scheduler.reduction_factor"},
		{s: Scheduler{Type: "asha", GracePeriod: 100, MaxT: 50}, field: "scheduler.grace_period"},
		{s: Scheduler{Type: "asha", GracePeriod: 500}, field: "scheduler.grace_period"}, // max_t defaults to run.iterations 500
		{s: Scheduler{Type: "asha", MinSamples: 3}, field: "scheduler.min_samples"},
		{s: Scheduler{Type: "median", ReductionFactor: 3}, field: "scheduler.reduction_factor"},
		{s: Scheduler{Type: "median", MaxT: 30}, field: "scheduler.max_t"},
	} {
		errs := tc.s.check(500, tc.policies)
		switch {
		case tc.field == "" && len(errs) > 0:
			t.Errorf("%+v: %v, want valid", tc.s, errs[0])
		case tc.field != "" && (len(errs) == 0 || errs[0].Field != tc.field):
			t.Errorf("%+v: %v, want an error at %s", tc.s, errs, tc.field)
		}
	}
}

// TestRanking: trials with a value by it (mode-aware), then stopped ones
// (later stop first), then the rest; best is a finished trial.
func TestRanking(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   string
		trials []Trial
		rank   []int
		best   int
	}{
		{"max", "max", []Trial{
			{Index: 1, State: "stopped", StoppedAt: 5, MeanReturn: 90, Iteration: 5},
			{Index: 2, State: "completed", MeanReturn: 300, Iteration: 50},
			{Index: 3, State: "stopped", StoppedAt: 15, MeanReturn: 20, Iteration: 15},
			{Index: 4, State: "failed"},
			{Index: 5, State: "succeeded", MeanReturn: 480, Iteration: 40},
			{Index: 6, State: "running", MeanReturn: 350, Iteration: 20},
			{Index: 7, State: StatePending},
			{Index: 8, State: "stopped", StoppedAt: 5, MeanReturn: 95, Iteration: 5},
		}, []int{5, 6, 2, 3, 8, 1, 4, 7}, 5},
		{"min", "min", []Trial{
			{Index: 1, State: "completed", MeanReturn: 300, Iteration: 50},
			{Index: 2, State: "completed", MeanReturn: 100, Iteration: 50},
		}, []int{2, 1}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Results{Trials: tc.trials, Metric: DefaultMetric, Mode: tc.mode}
			p.Tally()
			if !slices.Equal(p.Ranking, tc.rank) || p.Best != tc.best {
				t.Errorf("ranking %v best %d, want %v best %d", p.Ranking, p.Best, tc.rank, tc.best)
			}
		})
	}
}

// A sweep judged by one policy's return reads that policy's number, not
// the run's (which averages every trained policy's agents).
func TestPolicyMetric(t *testing.T) {
	const name = "policy/learner/recent_return_mean"
	ms := []learner.Metrics{
		{Iteration: 1, RecentReturnMean: 10, RecentEpisodes: 4, Values: map[string]float64{name: 3}},
		{Iteration: 2, RecentReturnMean: 20, RecentEpisodes: 8, Values: map[string]float64{name: 7, "policy/tft/recent_return_mean": 1}},
		{Iteration: 3, RecentReturnMean: 30, RecentEpisodes: 8}, // no value: the last one stands
	}
	var tr Trial
	tr.report(ms, name)
	if tr.Metric != 7 || tr.MeanReturn != 30 {
		t.Fatalf("metric %v, mean_return %v; want 7 and 30", tr.Metric, tr.MeanReturn)
	}
	st := newStopper(Scheduler{Type: SchedulerMedian, Metric: name}.WithDefaults(10))
	if v, ok := st.value(ms[1]); !ok || v != 7 {
		t.Fatalf("the stopper reads %v (%v), want 7", v, ok)
	}
	if _, ok := st.value(ms[2]); ok {
		t.Fatal("the stopper reads a value an iteration does not have")
	}
}
