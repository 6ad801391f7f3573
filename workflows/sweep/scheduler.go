package sweep

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/names"
	"github.com/trainyard/trainyard/internal/training"
)

// Trial schedulers (Ray Tune's AsyncHyperBandScheduler and
// MedianStoppingRule).
const (
	SchedulerASHA   = "asha"
	SchedulerMedian = "median"
)

// Scheduler defaults.
const (
	DefaultMetric          = "mean_return"
	DefaultGracePeriod     = 10
	DefaultReductionFactor = 3
	DefaultMinSamples      = 3
)

// Metrics a scheduler can judge trials by: each reads one iteration's
// numbers (ok false when the iteration has no value, e.g. no episode has
// ended yet).
var Metrics = map[string]func(learner.Metrics) (float64, bool){
	"mean_return":         func(m learner.Metrics) (float64, bool) { return m.RecentReturnMean, m.RecentEpisodes > 0 },
	"episode_return_mean": func(m learner.Metrics) (float64, bool) { return m.EpisodeReturnMean, m.Episodes > 0 },
	"episode_length_mean": func(m learner.Metrics) (float64, bool) { return m.EpisodeLengthMean, m.Episodes > 0 },
}

// policyMetrics are what a metric policy/<name>/<m> may name: one policy's
// returns in a multi-agent run (internal/ppo multiagent.go).
var policyMetrics = []string{"recent_return_mean", "episode_return_mean"}

// MetricOf is the reader of a metric name: one of Metrics, or
// policy/<policy>/<m> (m in policyMetrics), that policy's number from a
// multi-agent run's metrics (ok false where an iteration lacks it).
func MetricOf(name string) (func(learner.Metrics) (float64, bool), bool) {
	if f, ok := Metrics[name]; ok {
		return f, true
	}
	rest, ok := strings.CutPrefix(name, "policy/")
	policy, m, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || names.Policy.Check(policy) != nil || !slices.Contains(policyMetrics, m) {
		return nil, false
	}
	return func(ms learner.Metrics) (float64, bool) { v, ok := ms.Values[name]; return v, ok }, true
}

// Scheduler stops weak trials early, judging them by a metric their runs
// report after every segment.
type Scheduler struct {
	Type            string  `json:"type" enum:"asha,median" doc:"asha: asynchronous successive halving — at each rung (grace_period × reduction_factor^k iterations) a trial continues only if it is in the top 1/reduction_factor of the trials that reached the rung before it. median: from grace_period on, a trial stops when its best value so far is worse than the median of the other trials' running means at the same iteration."`
	Metric          string  `json:"metric,omitempty" maxLength:"200" doc:"What trials are judged by: mean_return (default: the mean return of the last 100 episodes), episode_return_mean, episode_length_mean, or in a multi-agent run one policy's policy/<name>/recent_return_mean or policy/<name>/episode_return_mean."`
	Mode            string  `json:"mode,omitempty" enum:"max,min" doc:"max (default): higher is better; min: lower is better."`
	GracePeriod     int64   `json:"grace_period,omitempty" minimum:"0" doc:"Iterations a trial trains before it can be stopped; asha's first rung (default 10)."`
	ReductionFactor float64 `json:"reduction_factor,omitempty" minimum:"0" doc:"asha: the rungs' spacing and the share that goes on, 1/reduction_factor (default 3)."`
	MaxT            int64   `json:"max_t,omitempty" minimum:"0" doc:"asha: iterations a trial trains at most; its run's iterations are set to it (default run.iterations)."`
	MinSamples      int     `json:"min_samples,omitempty" minimum:"0" doc:"median: other trials that must have reached an iteration before a trial is judged there (default 3)."`
}

// WithDefaults fills the unset fields; maxT is the base run's iterations.
func (s Scheduler) WithDefaults(maxT int64) Scheduler {
	if s.Metric == "" {
		s.Metric = DefaultMetric
	}
	if s.Mode == "" {
		s.Mode = "max"
	}
	if s.GracePeriod == 0 {
		s.GracePeriod = DefaultGracePeriod
	}
	if s.Type == SchedulerASHA {
		if s.ReductionFactor == 0 {
			s.ReductionFactor = DefaultReductionFactor
		}
		if s.MaxT == 0 {
			s.MaxT = maxT
		}
	}
	if s.Type == SchedulerMedian && s.MinSamples == 0 {
		s.MinSamples = DefaultMinSamples
	}
	return s
}

// Rungs are asha's milestones, lowest first: grace_period ×
// reduction_factor^k for every k that stays below max_t (Ray Tune's
// rungs). With grace 5, factor 3, max_t 100: 5, 15, 45.
func (s Scheduler) Rungs() []int64 {
	var out []int64
	for r := float64(s.GracePeriod); r < float64(s.MaxT) && s.GracePeriod > 0 && s.ReductionFactor > 1; r *= s.ReductionFactor {
		if n := int64(math.Round(r)); len(out) == 0 || n > out[len(out)-1] {
			out = append(out, n)
		}
	}
	return out
}

// check lists what is wrong with s; runIterations and policies are the
// base run's (policies: its policies' names, none for the default one).
func (s Scheduler) check(runIterations int64, policies []string) []*training.FieldError {
	var errs []*training.FieldError
	bad := func(field, reason string) {
		errs = append(errs, &training.FieldError{Field: "scheduler." + field, Reason: reason})
	}
	switch s.Type {
	case SchedulerASHA, SchedulerMedian:
	default:
		bad("type", fmt.Sprintf("%q: want asha or median", s.Type))
	}
	if _, ok := MetricOf(s.Metric); !ok && s.Metric != "" {
		have := slices.Sorted(maps.Keys(Metrics))
		bad("metric", fmt.Sprintf("%q: want one of %s, or policy/<name>/%s", s.Metric, strings.Join(have, ", "), strings.Join(policyMetrics, "|")))
	} else if p, ok := strings.CutPrefix(s.Metric, "policy/"); ok {
		if len(policies) == 0 {
			policies = []string{learner.DefaultPolicy}
		}
		if name, _, _ := strings.Cut(p, "/"); !slices.Contains(policies, name) {
			bad("metric", fmt.Sprintf("%q: the run has no policy %s (its policies: %s)", s.Metric, name, strings.Join(policies, ", ")))
		}
	}
	if s.Mode != "" && s.Mode != "max" && s.Mode != "min" {
		bad("mode", fmt.Sprintf("%q: want max or min", s.Mode))
	}
	if s.GracePeriod < 0 {
		bad("grace_period", "must be ≥ 1 iteration (0: default 10)")
	}
	if s.Type != SchedulerASHA && s.ReductionFactor != 0 {
		bad("reduction_factor", "is asha's")
	}
	if s.Type != SchedulerASHA && s.MaxT != 0 {
		bad("max_t", "is asha's")
	}
	if s.Type != SchedulerMedian && s.MinSamples != 0 {
		bad("min_samples", "is the median rule's")
	}
	d := s.WithDefaults(runIterations)
	if s.Type == SchedulerASHA {
		if math.IsNaN(s.ReductionFactor) || (s.ReductionFactor != 0 && s.ReductionFactor < 2) {
			bad("reduction_factor", "must be ≥ 2 (0: default 3)")
		}
		if s.MaxT < 0 {
			bad("max_t", "must be ≥ 1 iteration (0: run.iterations)")
		} else if d.GracePeriod >= d.MaxT {
			bad("grace_period", fmt.Sprintf("%d leaves no rung below max_t %d", d.GracePeriod, d.MaxT))
		}
	}
	if s.MinSamples < 0 {
		bad("min_samples", "must be ≥ 1 (0: default 3)")
	}
	return errs
}

// stopper makes a scheduler's decisions as trial reports arrive. Its
// state is plain data built only from the reports, in the order the
// workflow receives them, so a replay decides the same.
type stopper struct {
	s     Scheduler
	value func(learner.Metrics) (float64, bool)
	// seen is each trial's results by index, in iteration order.
	seen map[int][]result
	// rungs[k] records each trial's value at asha rung k.
	rungs []map[int]float64
	ms    []int64
}

type result struct {
	iteration int64
	value     float64
}

// Decision is the outcome of a trial's report that stops it.
type Decision struct {
	Iteration int64 // the rung (asha) or iteration (median) it stopped at
	Reason    string
}

func newStopper(s Scheduler) *stopper {
	value, ok := MetricOf(s.Metric)
	if !ok {
		value = Metrics[DefaultMetric]
	}
	st := &stopper{s: s, value: value, seen: map[int][]result{}}
	if s.Type == SchedulerASHA {
		st.ms = s.Rungs()
		st.rungs = make([]map[int]float64, len(st.ms))
		for k := range st.rungs {
			st.rungs[k] = map[int]float64{}
		}
	}
	return st
}

// better says whether a beats b in mode (max unless "min").
func better(mode string, a, b float64) bool {
	if mode == "min" {
		return a < b
	}
	return a > b
}

// short is how a reason says a value falls short of a bar in mode.
func short(mode string) string {
	if mode == "min" {
		return ">"
	}
	return "<"
}

// observe records trial's new iterations (older or repeated ones, as a
// restore hands back, are skipped) and says whether the trial must stop.
// The iterations are judged in order; the first that fails stops it.
func (st *stopper) observe(trial int, ms []learner.Metrics) (Decision, bool) {
	for _, m := range ms {
		v, ok := st.value(m)
		if !ok || math.IsNaN(v) {
			continue
		}
		prev := st.seen[trial]
		if n := len(prev); n > 0 && m.Iteration <= prev[n-1].iteration {
			continue
		}
		st.seen[trial] = append(prev, result{m.Iteration, v})
		var d Decision
		var stop bool
		if st.s.Type == SchedulerASHA {
			d, stop = st.asha(trial, m.Iteration, v)
		} else {
			d, stop = st.median(trial, m.Iteration)
		}
		if stop {
			return d, true
		}
	}
	return Decision{}, false
}

// asha is Ray Tune's AsyncHyperBandScheduler with one bracket: a trial
// reaching a rung is compared with the trials recorded there before it;
// below the (1 - 1/reduction_factor) quantile of their values it stops.
// The first trial at a rung always goes on.
func (st *stopper) asha(trial int, it int64, v float64) (Decision, bool) {
	for k := len(st.ms) - 1; k >= 0; k-- {
		rec := st.rungs[k]
		if _, done := rec[trial]; done {
			return Decision{}, false // judged here (and below) already
		}
		if it < st.ms[k] {
			continue
		}
		vals := make([]float64, 0, len(rec))
		for _, x := range rec {
			vals = append(vals, x)
		}
		rec[trial] = v
		if len(vals) == 0 {
			return Decision{}, false
		}
		q := 1 - 1/st.s.ReductionFactor
		if st.s.Mode == "min" {
			q = 1 / st.s.ReductionFactor
		}
		cut := percentile(vals, q)
		if !better(st.s.Mode, cut, v) {
			return Decision{}, false
		}
		return Decision{Iteration: st.ms[k], Reason: fmt.Sprintf("stopped by asha at rung %d (%s %s %s cutoff %s of %d trials)",
			st.ms[k], st.s.Metric, num(v), short(st.s.Mode), num(cut), len(vals))}, true
	}
	return Decision{}, false
}

// median is Ray Tune's MedianStoppingRule: from grace_period on, a
// trial's best value so far is compared with the median of the running
// means (up to this iteration) of the other trials that reached it; worse
// stops it. With fewer than min_samples such trials it goes on.
func (st *stopper) median(trial int, it int64) (Decision, bool) {
	if it < st.s.GracePeriod {
		return Decision{}, false
	}
	var means []float64
	for other, rs := range st.seen {
		if other == trial || len(rs) == 0 || rs[len(rs)-1].iteration < it {
			continue
		}
		sum, n := 0.0, 0
		for _, r := range rs {
			if r.iteration <= it {
				sum += r.value
				n++
			}
		}
		means = append(means, sum/float64(n))
	}
	if len(means) < st.s.MinSamples {
		return Decision{}, false
	}
	best := math.NaN()
	for _, r := range st.seen[trial] {
		if math.IsNaN(best) || better(st.s.Mode, r.value, best) {
			best = r.value
		}
	}
	med := percentile(means, 0.5)
	if !better(st.s.Mode, med, best) {
		return Decision{}, false
	}
	return Decision{Iteration: it, Reason: fmt.Sprintf("stopped by median at iteration %d (best %s %s %s median %s of %d trials)",
		it, st.s.Metric, num(best), short(st.s.Mode), num(med), len(means))}, true
}

// percentile is numpy's default (linear interpolation) q-quantile of vs,
// 0 ≤ q ≤ 1; vs is sorted in place.
func percentile(vs []float64, q float64) float64 {
	slices.Sort(vs)
	pos := q * float64(len(vs)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(vs)-1)
	return vs[lo] + (pos-float64(lo))*(vs[hi]-vs[lo])
}

// num renders a metric for a reason: one decimal, or 3 significant
// digits below 1.
func num(v float64) string {
	if math.Abs(v) >= 1 || v == 0 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
