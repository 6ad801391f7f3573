package train

import (
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/workflows/cluster"
)

// gangGrace is how long a gang whose rank exited non-zero waits for
// another rank to be reported lost: longer than commandOptions' heartbeat
// timeout.
const gangGrace = 25 * time.Second

// exited reports whether err is a trainer's non-zero exit.
func exited(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == ErrTrainingFailed
}

// commandOptions are a command trainer's activity options on queue: one
// long activity, its death noticed by heartbeats.
func commandOptions(ctx workflow.Context, queue string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToStartTimeout: 30 * time.Second,
		StartToCloseTimeout:    30 * 24 * time.Hour,
		HeartbeatTimeout:       20 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// runRanks runs a multi-node command trainer placed as alloc: rank 0's
// agent names a free port, then every rank starts with torch.distributed's
// variables pointing at rank 0's node. The gang stands or falls together:
// the first rank to fail, be lost or drain stops the others, and the
// caller places the whole gang again from the last synced checkpoint. It
// returns rank 0's status, and on a failure the node of the rank that
// failed first.
func runRanks(ctx workflow.Context, in Input, spec training.Spec, alloc cluster.Allocation, p *RunProgress) (training.CommandStatus, string, error) {
	ranks := slices.Clone(alloc.Assignments)
	slices.SortFunc(ranks, func(a, b cluster.Assigned) int { return a.Instance - b.Instance })
	p.Ranks = p.Ranks[:0]
	for _, r := range ranks {
		p.Ranks = append(p.Ranks, r.Node)
	}
	portCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: ranks[0].Queue, ScheduleToStartTimeout: 30 * time.Second, StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var port int
	if err := workflow.ExecuteActivity(portCtx, (*AgentActivities).FreePort).Get(ctx, &port); err != nil {
		return training.CommandStatus{}, ranks[0].Node, err
	}
	addr := ranks[0].Address
	if addr == "" {
		addr = "127.0.0.1" // local nodes: this machine
	}
	gctx, stop := workflow.WithCancel(ctx)
	defer stop()
	sel := workflow.NewSelector(ctx)
	status := make([]training.CommandStatus, len(ranks))
	var firstErr error
	var failedNode, drained string
	var graceTimer workflow.Future
	pending := len(ranks)
	for i, r := range ranks {
		f := workflow.ExecuteActivity(commandOptions(gctx, r.Queue), (*AgentActivities).RunCommand, training.CommandInput{
			RunID: in.RunID, Spec: spec, GPUs: r.GPUs, EnvPlugin: in.EnvPlugin,
			Rank: i, WorldSize: len(ranks), MasterAddr: addr, MasterPort: port, Epoch: p.Epoch,
		})
		sel.AddFuture(f, func(f workflow.Future) {
			pending--
			err := f.Get(ctx, &status[i])
			switch {
			case err == nil && status[i].Drained == "":
				return
			case firstErr == nil && drained == "":
				failedNode, drained, firstErr = r.Node, status[i].Drained, err
			case exited(firstErr) && err != nil && !exited(err) && !temporal.IsCanceledError(err):
				// The cause, found in the grace window: the node this
				// rank was lost with.
				failedNode, firstErr = r.Node, err
			default:
				return
			}
			if exited(firstErr) && graceTimer == nil {
				// A rank that exits non-zero is most often one whose
				// peer died (a collective fails at once), while a lost
				// agent shows only when its heartbeats time out: wait
				// that long for the cause, so the gang is not placed
				// again on the dead node.
				graceTimer = workflow.NewTimer(gctx, gangGrace)
				sel.AddFuture(graceTimer, func(workflow.Future) { stop() })
				return
			}
			stop() // the gang stands or falls together
		})
	}
	for pending > 0 {
		sel.Select(ctx)
	}
	st := status[0]
	if drained != "" {
		st.Drained = drained
		return st, failedNode, nil
	}
	var app *temporal.ApplicationError
	switch {
	case firstErr == nil, ctx.Err() != nil:
	case errors.As(firstErr, &app) && app.Type() == ErrTrainingFailed:
		// Placed again, as for a lost rank, until the run's failure
		// budget is spent: the exit may be a peer's death.
		firstErr = temporal.NewApplicationError("a rank on node "+failedNode+" failed: "+app.Message(), "RankFailed")
	case temporal.IsCanceledError(firstErr):
		firstErr = temporal.NewApplicationError("a rank of the gang stopped", "GangStopped")
	}
	return st, failedNode, firstErr
}
