package training

import (
	"context"
	"sync/atomic"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/pluginhost"
)

// step is one iteration's outcome.
type step struct {
	iteration int64 // the iteration it trained (counted from 1)
	m         learner.Metrics
	calls     pluginhost.StepStats // its env plugin calls
	err       error
}

// step trains one iteration.
func (s *session) step(ctx context.Context) step {
	it, _ := s.learner.Counters()
	m, err := s.learner.Iterate(ctx)
	st := step{iteration: it + 1, m: m, err: err}
	if s.penv != nil {
		st.calls = s.penv.TakeStepStats()
	}
	return st
}

// runAhead trains a session's next iterations in the background while
// the checkpoint that ended its segment uploads and the next segment is
// on its way (a round trip through the control plane), so learning never
// waits for either. The next segment takes them over as its first
// iterations: the same learner in the same order, so the numbers are
// exactly those of training without it.
type runAhead struct {
	stop  atomic.Bool
	done  chan struct{}
	steps []step
}

// startAhead trains up to n iterations (the next segment's) in the
// background, stopping early at the run's budget or target, on a drain or
// a failed iteration, or when the next segment joins.
func (s *session) startAhead(r *Runner, spec Spec, n int) {
	a := &runAhead{done: make(chan struct{})}
	s.ahead = a
	go func() {
		defer close(a.done)
		for range n {
			if it, _ := s.learner.Counters(); a.stop.Load() || it >= int64(spec.Iterations) || r.Drain.Reason() != "" {
				return
			}
			// Not the activity's context: that one ends with the segment.
			// Plugin calls keep their own deadlines.
			st := s.step(context.Background())
			a.steps = append(a.steps, st)
			if st.err != nil || spec.Reached(st.m) {
				return
			}
		}
	}()
}

// join stops the run-ahead once the iteration in flight is done and
// returns the iterations it trained, oldest first (none without one).
func (s *session) join() []step {
	a := s.ahead
	if a == nil {
		return nil
	}
	s.ahead = nil
	a.stop.Store(true)
	<-a.done
	return a.steps
}
