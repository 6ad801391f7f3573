package training

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/scalars"
)

// MetricSteps turns iterations' metrics into scalar steps (step =
// iteration); wall times come from stamps (zero when it never saw the
// iteration: the log keeps the time recorded before, or stamps it now).
func MetricSteps(ms []learner.Metrics, stamps *Stamps) []scalars.Step {
	out := make([]scalars.Step, 0, len(ms))
	for _, m := range ms {
		s := scalars.Step{Step: m.Iteration, WallTime: stamps.at(m.Iteration)}
		for _, name := range m.Names() {
			if v, ok := m.Value(name); ok {
				s.Values = append(s.Values, scalars.Value{Tag: name, Value: v})
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
func (s *Stamps) Saw(m learner.Metrics) {
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
func (r *Runner) WriteScalars(ctx context.Context, runID string, ms []learner.Metrics, stamps *Stamps) error {
	if r.Objects == nil || len(ms) == 0 {
		return nil
	}
	log := scalars.Log{Store: r.Objects, Prefix: scalars.RunPrefix(runID)}
	if err := log.Write(ctx, MetricSteps(ms, stamps)); err != nil {
		return fmt.Errorf("run %s: curves: %w", runID, err)
	}
	return nil
}
