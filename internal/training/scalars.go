package training

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/trainyard/trainyard/internal/ppo"
	"github.com/trainyard/trainyard/internal/scalars"
)

// metricTags are the curves a run of the built-in learner writes, one per
// iteration (the step), named as in GET /v1/runs/{id} progress.metrics.
// The episode_* ones are left out of iterations in which no episode
// finished (their zero would read as a return of 0).
var metricTags = []struct {
	tag      string
	episodic bool
	get      func(m ppo.Metrics) float64
}{
	{"recent_return_mean", false, func(m ppo.Metrics) float64 { return m.RecentReturnMean }},
	{"recent_episodes", false, func(m ppo.Metrics) float64 { return float64(m.RecentEpisodes) }},
	{"episode_return_mean", true, func(m ppo.Metrics) float64 { return m.EpisodeReturnMean }},
	{"episode_return_min", true, func(m ppo.Metrics) float64 { return m.EpisodeReturnMin }},
	{"episode_return_max", true, func(m ppo.Metrics) float64 { return m.EpisodeReturnMax }},
	{"episode_length_mean", true, func(m ppo.Metrics) float64 { return m.EpisodeLengthMean }},
	{"episodes", false, func(m ppo.Metrics) float64 { return float64(m.Episodes) }},
	{"timesteps", false, func(m ppo.Metrics) float64 { return float64(m.Timesteps) }},
	{"steps_per_second", false, func(m ppo.Metrics) float64 { return m.StepsPerSecond }},
	{"rollout_steps_per_second", false, func(m ppo.Metrics) float64 { return m.RolloutStepsPerSecond }},
	{"policy_loss", false, func(m ppo.Metrics) float64 { return m.PolicyLoss }},
	{"value_loss", false, func(m ppo.Metrics) float64 { return m.ValueLoss }},
	{"entropy", false, func(m ppo.Metrics) float64 { return m.Entropy }},
	{"approx_kl", false, func(m ppo.Metrics) float64 { return m.ApproxKL }},
	{"clip_fraction", false, func(m ppo.Metrics) float64 { return m.ClipFraction }},
	{"explained_variance", false, func(m ppo.Metrics) float64 { return m.ExplainedVariance }},
	{"grad_norm", false, func(m ppo.Metrics) float64 { return m.GradNorm }},
	{"learning_rate", false, func(m ppo.Metrics) float64 { return m.LearningRate }},
	{"minibatches", false, func(m ppo.Metrics) float64 { return float64(m.Minibatches) }},
}

// MetricSteps turns iterations' metrics into scalar steps (step =
// iteration); wall times come from stamps (zero when it never saw the
// iteration: the log keeps the time recorded before, or stamps it now).
func MetricSteps(ms []ppo.Metrics, stamps *Stamps) []scalars.Step {
	out := make([]scalars.Step, 0, len(ms))
	for _, m := range ms {
		s := scalars.Step{Step: m.Iteration, WallTime: stamps.at(m.Iteration)}
		for _, t := range metricTags {
			if !t.episodic || m.Episodes > 0 {
				s.Values = append(s.Values, scalars.Value{Tag: t.tag, Value: t.get(m)})
			}
		}
		out = append(out, s)
	}
	return out
}

// Stamps records when each iteration finished (a segment's progress
// callback calls Saw), for the curves' wall times.
type Stamps struct {
	mu   sync.Mutex
	when map[int64]float64
}

// Saw records that m's iteration finished now.
func (s *Stamps) Saw(m ppo.Metrics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.when == nil {
		s.when = map[int64]float64{}
	}
	s.when[m.Iteration] = float64(time.Now().UnixNano()) / 1e9
}

func (s *Stamps) at(it int64) float64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.when[it]
}

// WriteScalars records a segment's metrics as the run's curves
// (scalars.RunPrefix: TensorBoard event files and metrics.csv). A segment
// redone after a crash rewrites the same steps, never duplicates them.
// Without a bucket (tests) it does nothing.
func (r *Runner) WriteScalars(ctx context.Context, runID string, ms []ppo.Metrics, stamps *Stamps) error {
	if r.Objects == nil || len(ms) == 0 {
		return nil
	}
	log := scalars.Log{Store: r.Objects, Prefix: scalars.RunPrefix(runID)}
	if err := log.Write(ctx, MetricSteps(ms, stamps)); err != nil {
		return fmt.Errorf("run %s: curves: %w", runID, err)
	}
	return nil
}
