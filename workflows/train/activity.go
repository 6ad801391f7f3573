package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/logstream"
	"github.com/trainyard/trainyard/internal/training"
)

// AgentActivities run on a node's agent.
type AgentActivities struct {
	Runner *training.Runner
	// Dir holds command trainers' checkpoint dirs (runs/<id>/checkpoint).
	Dir string
}

// RunCommand runs a bring-your-own trainer, heartbeating its recent output
// and newest synced checkpoint.
func (a *AgentActivities) RunCommand(ctx context.Context, in training.CommandInput) (training.CommandStatus, error) {
	in.Dir, in.Env = a.Dir, os.Environ()
	var stopLog func()
	in.Log, stopLog = logstream.Tee(ctx, a.Runner.Objects, logstream.RankPrefix(in.RunID, in.Rank), activity.GetInfo(ctx).ActivityID, io.Discard, activity.GetLogger(ctx))
	defer stopLog()
	activity.RecordHeartbeat(ctx)
	st, err := a.Runner.RunCommand(ctx, in, func(st training.CommandStatus) { activity.RecordHeartbeat(ctx, st) })
	if err != nil && errors.Is(err, training.ErrFatal) {
		return st, temporal.NewNonRetryableApplicationError(err.Error(), ErrTrainingFailed, err)
	}
	return st, err
}

// FreePort is a TCP port free on this node now: a multi-node gang's rank 0
// listens there (MASTER_PORT). Another process may take it before the
// trainer starts; the gang then fails and is placed again with a new one.
func (a *AgentActivities) FreePort(ctx context.Context) (int, error) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// RunSegment trains one segment, heartbeating the latest iteration's
// metrics so a dead agent is noticed within the heartbeat timeout and the
// API can show progress inside a segment.
func (a *AgentActivities) RunSegment(ctx context.Context, in training.SegmentInput) (training.SegmentResult, error) {
	return a.segment(ctx, in, a.Runner.RunSegment)
}

// RunDistributedSegment is RunSegment for a run with rollout workers: the
// trainer learns from the fragments they write to S3.
func (a *AgentActivities) RunDistributedSegment(ctx context.Context, in training.SegmentInput) (training.SegmentResult, error) {
	return a.segment(ctx, in, a.Runner.RunDistributedSegment)
}

// RunRollouts is one rollout worker of a distributed run: it acts with each
// weight version the trainer publishes until the run ends, heartbeating
// its progress (fragments written, weight version) so a dead node is
// noticed within the heartbeat timeout and the worker placed again.
func (a *AgentActivities) RunRollouts(ctx context.Context, in training.RolloutInput) (training.RolloutStatus, error) {
	return beating(ctx, a.stalled, func(beat func(training.RolloutStatus)) (training.RolloutStatus, error) {
		return a.Runner.RunRollouts(ctx, in, beat)
	})
}

// RunLoopTrainer is the trainer side of a kind llm run: the trajectory
// pool, weight sync and the trainer, heartbeating the loop's state (the
// API and the Temporal UI show it).
func (a *AgentActivities) RunLoopTrainer(ctx context.Context, in training.LoopTrainerInput) (training.LoopStatus, error) {
	in.Dir, in.Env = a.Dir, os.Environ()
	var stopLog func()
	in.Log, stopLog = logstream.Tee(ctx, a.Runner.Objects, logstream.RankPrefix(in.RunID, 0), activity.GetInfo(ctx).ActivityID, io.Discard, activity.GetLogger(ctx))
	defer stopLog()
	st, err := beating(ctx, a.stalled, func(beat func(training.LoopStatus)) (training.LoopStatus, error) {
		return a.Runner.RunLoopTrainer(ctx, in, beat)
	})
	if errors.Is(err, context.Canceled) {
		// A paused or cancelled loop's last state (its last publish) goes
		// back with the cancellation: a cancelled activity has no result.
		return st, temporal.NewCanceledError(st)
	}
	return st, err
}

// RunLoopRollouts is one rollout worker of a kind llm run, heartbeating its
// progress and why it waits.
func (a *AgentActivities) RunLoopRollouts(ctx context.Context, in training.LoopRolloutInput) (training.LoopWorkerStatus, error) {
	return beating(ctx, a.stalled, func(beat func(training.LoopWorkerStatus)) (training.LoopWorkerStatus, error) {
		return a.Runner.RunLoopRollouts(ctx, in, beat)
	})
}

// stallAfter is how long S3 may not answer before a heartbeat says so.
const stallAfter = 10 * time.Second

// stalled says why the agent's S3 keeps its work waiting, if it does.
func (a *AgentActivities) stalled() string { return a.Runner.Objects.Stalled(stallAfter) }

// beating runs an activity's work, heartbeating every status it reports
// and, every 2 s, the latest again (loading a plugin or restoring a
// checkpoint may report nothing for a while); a fatal error does not retry.
// When stalled says the work waits on something, that goes beside the
// status as the heartbeat's second value (LiveOf's Waiting).
func beating[T, R any](ctx context.Context, stalled func() string, run func(beat func(T)) (R, error)) (R, error) {
	beat := make(chan T, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		var (
			last T
			got  bool // a status came
		)
		for {
			select {
			case <-done:
				return
			case last = <-beat:
				got = true
			case <-t.C:
			}
			switch why := stalled(); {
			case why != "":
				activity.RecordHeartbeat(ctx, last, why)
			case got:
				activity.RecordHeartbeat(ctx, last)
			default:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	st, err := run(func(st T) {
		select {
		case beat <- st:
		default:
		}
	})
	if err != nil && errors.Is(err, training.ErrFatal) {
		return st, temporal.NewNonRetryableApplicationError(err.Error(), ErrTrainingFailed, err)
	}
	return st, err
}

type segmentFunc func(context.Context, training.SegmentInput, func(learner.Metrics)) (training.SegmentResult, error)

func (a *AgentActivities) segment(ctx context.Context, in training.SegmentInput, run segmentFunc) (training.SegmentResult, error) {
	return beating(ctx, a.stalled, func(beat func(learner.Metrics)) (training.SegmentResult, error) {
		sctx, tel := startSegment(ctx, in) // the segment's span and metrics (telemetry.go)
		stamps := &training.Stamps{}
		res, err := run(sctx, in, func(m learner.Metrics) {
			stamps.Saw(m)
			tel.iteration(sctx, m)
			beat(m)
		})
		if err == nil {
			// The curves (TensorBoard, CSV) after the checkpoint: a failure
			// loses the segment, whose redo writes them again.
			err = a.Runner.WriteScalars(sctx, in.RunID, res.Metrics, stamps)
		}
		tel.end(res, err)
		return res, err
	})
}
