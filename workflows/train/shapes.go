package train

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/workflows/cluster"
)

// Each algorithm's shape (training.Shape) is run by one runner here: the
// workflow places the run, hands the placement to its shape's runner, and
// acts on what it returns (lost, drained, ended, or go on placed), so
// what a placement does lives with its shape and the workflow only keeps
// the run's life: placement, losses, drains, pause, cancel.

// placedRun is one placement of a run, as a shape's runner gets it.
type placedRun struct {
	in     Input
	spec   training.Spec
	alloc  *cluster.Allocation
	gang   map[int]cluster.Allocation // rollout workers placed with the trainer
	fl     *fleet
	p      *RunProgress
	paused *bool
}

// outcome is what a runner's placement came to when it returns no error
// (an error is a lost placement, or a failed run when non-retryable).
type outcome struct {
	end        string // the run ended in this state
	drained    string // the node drains (why): move the run off it
	progressed bool   // with drained: a checkpoint was taken there
	// zero: go on, on the same placement (the next segment), or placed
	// again (a paused loop, once resumed)
}

// runner runs one placement of a shape.
type runner func(ctx workflow.Context, r *placedRun) (outcome, error)

var shapes = map[training.Shape]runner{
	training.ShapeSegments: runSegment,
	training.ShapeCommand:  runCommand,
	training.ShapeLoop:     runLoopPlacement,
}

// runLoopPlacement runs a kind llm run's gang until its trainer returns.
func runLoopPlacement(ctx workflow.Context, r *placedRun) (outcome, error) {
	st, err := runLoop(ctx, r.in, r.spec, *r.alloc, r.gang, r.fl, r.p, r.paused)
	// The pool goes with the trainer: the workers start again with the
	// next one.
	r.fl.stop(ctx)
	switch {
	case err == nil && st.Drained != "":
		return outcome{drained: st.Drained, progressed: true}, nil
	case err == nil:
		return outcome{end: "succeeded"}, nil
	case *r.paused && ctx.Err() == nil && temporal.IsCanceledError(err):
		return outcome{}, nil // paused at its last whole step
	}
	return outcome{}, err
}

// runCommand runs a command trainer: one long activity, the trainer's own
// process, its checkpoint dir synced as it goes and restored by the next
// placement (a gang of ranks with nodes > 1).
func runCommand(ctx workflow.Context, r *placedRun) (outcome, error) {
	var st training.CommandStatus
	var err error
	if r.spec.Ranks() > 1 {
		var node string
		if st, node, err = runRanks(ctx, r.in, r.spec, *r.alloc, r.p); node != "" {
			r.alloc.Node = node // the rank that failed or drained first
		}
	} else {
		err = workflow.ExecuteActivity(commandOptions(ctx, r.alloc.Queue), (*AgentActivities).RunCommand, training.CommandInput{
			RunID: r.in.RunID, Spec: r.spec, GPUs: r.alloc.GPUs, EnvPlugin: r.in.EnvPlugin, Epoch: r.p.Epoch,
		}).Get(ctx, &st)
	}
	if err != nil {
		return outcome{}, err
	}
	r.p.Checkpoint, r.p.Output = st.Checkpoint, st.Output
	if st.Restored > 0 {
		r.p.Restores = append(r.p.Restores, RunRestore{Checkpoint: st.Restored, Node: r.p.Node})
	}
	if st.Drained != "" {
		return outcome{drained: st.Drained, progressed: true}, nil
	}
	return outcome{end: "succeeded"}, nil
}

// runSegment runs one segment of the built-in learner (checkpoint_every
// iterations, then a checkpoint), its rollout workers beside it when
// distributed.
func runSegment(ctx workflow.Context, r *placedRun) (outcome, error) {
	in, spec, p, fl := r.in, r.spec, r.p, r.fl
	if spec.Distributed() && fl.cancel == nil {
		fl.start(ctx, in, spec, p, r.gang)
	}
	segCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              r.alloc.Queue,
		ScheduleToStartTimeout: 30 * time.Second,
		StartToCloseTimeout:    6 * time.Hour,
		HeartbeatTimeout:       20 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var seg training.SegmentResult
	segIn := training.SegmentInput{
		RunID: in.RunID, Spec: spec, EnvPlugin: in.EnvPlugin, RewardPlugin: in.RewardPlugin,
		FromCheckpoint: p.Checkpoint, Iterations: spec.CheckpointEvery, Endpoints: in.Endpoints, Epoch: p.Epoch,
	}
	var err error
	if spec.Distributed() {
		err = fl.segment(ctx, segCtx, segIn, &seg)
		if fl.fatal != nil {
			return outcome{}, temporal.NewNonRetryableApplicationError(fl.fatal.Error(), ErrTrainingFailed, nil)
		}
	} else {
		err = workflow.ExecuteActivity(segCtx, (*AgentActivities).RunSegment, segIn).Get(ctx, &seg)
	}
	if err != nil {
		return outcome{}, err
	}
	p.apply(seg)
	if in.ReportProgress && len(seg.Metrics) > 0 {
		// Not waited for: the parent may be gone.
		if parent := workflow.GetInfo(ctx).ParentWorkflowExecution; parent != nil {
			workflow.SignalExternalWorkflow(ctx, parent.ID, "", SignalTrialProgress, TrialProgress{RunID: in.RunID, Metrics: trimRollouts(seg.Metrics)})
		}
	}
	switch {
	case seg.Done:
		return outcome{end: p.finish(spec, seg)}, nil
	case seg.Drained != "":
		return outcome{drained: seg.Drained, progressed: len(seg.Metrics) > 0}, nil
	}
	return outcome{}, nil
}
