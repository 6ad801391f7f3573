package train

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/ppo"
	"github.com/trainyard/trainyard/internal/training"
)

// AgentActivities run on a node's agent.
type AgentActivities struct {
	Runner *training.Runner
}

// RunSegment trains one segment, heartbeating the latest iteration's
// metrics so a dead agent is noticed within the heartbeat timeout and the
// API can show progress inside a segment.
func (a *AgentActivities) RunSegment(ctx context.Context, in training.SegmentInput) (training.SegmentResult, error) {
	// Loading a plugin or restoring a checkpoint can take longer than one
	// iteration: beat on a timer as well.
	beat := make(chan ppo.Metrics, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		var last *ppo.Metrics
		for {
			select {
			case <-done:
				return
			case m := <-beat:
				last = &m
				activity.RecordHeartbeat(ctx, m)
			case <-t.C:
				if last != nil {
					activity.RecordHeartbeat(ctx, *last)
				} else {
					activity.RecordHeartbeat(ctx)
				}
			}
		}
	}()
	res, err := a.Runner.RunSegment(ctx, in, func(m ppo.Metrics) {
		select {
		case beat <- m:
		default:
		}
	})
	if err != nil && errors.Is(err, training.ErrFatal) {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), ErrTrainingFailed, err)
	}
	return res, err
}
