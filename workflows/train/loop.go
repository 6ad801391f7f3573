package train

import (
	"errors"
	"net"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/workflows/cluster"
)

// A kind llm run (seed 003's loop) is placed like a distributed run: the
// trainer and its rollout workers as one gang, spread, the workers with no
// GPU. The trainer's activity holds the trajectory pool and weight sync
// (so they are colocated with it by construction) and listens on a port
// its agent picked; the rollout workers put trajectories there. A lost
// worker is placed again alone and skips what the pool already has; a lost
// trainer takes the pool with it, so the whole gang is placed again and
// the pool is refilled from the last published checkpoint's ledger.

// runLoop runs a placed loop until its trainer returns: the last step
// published, a pause (paused turns true: the trainer publishes its last
// whole step and stops), a drain, or a failure. The fleet is left running;
// the caller stops it.
func runLoop(ctx workflow.Context, in Input, spec training.Spec, alloc cluster.Allocation, placed map[int]cluster.Allocation, fl *fleet, p *RunProgress, paused *bool) (training.LoopStatus, error) {
	var st training.LoopStatus
	portCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: alloc.Queue, ScheduleToStartTimeout: 30 * time.Second, StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var port int
	if err := workflow.ExecuteActivity(portCtx, (*AgentActivities).FreePort).Get(ctx, &port); err != nil {
		return st, err
	}
	addr := "127.0.0.1" // local nodes: this machine
	for _, a := range alloc.Assignments {
		if a.Address != "" {
			addr = a.Address
		}
	}
	fl.pool = "http://" + net.JoinHostPort(addr, strconv.Itoa(port))
	// The pool serves under its placement's epoch: a rollout worker of a
	// superseded trainer (cut off, then healed) holds the old URL, and is
	// refused even where this trainer got its predecessor's address and port.
	poolPath := ""
	if workflow.GetVersion(ctx, "loop-pool-epoch-path", workflow.DefaultVersion, 1) == 1 {
		poolPath = "/placement/" + strconv.FormatInt(p.Epoch, 10)
		fl.pool += poolPath
	}
	fl.start(ctx, in, spec, p, placed)
	tctx, cancel := workflow.WithCancel(ctx)
	fl.segCancel = cancel // a worker that fails for good stops the trainer
	defer func() { fl.segCancel = nil }()
	// A paused or cancelled trainer publishes its last whole step before it
	// returns: wait for that, and for the state it returns.
	actx := commandOptions(tctx, alloc.Queue)
	ao := workflow.GetActivityOptions(actx)
	ao.WaitForCancellation = true
	f := workflow.ExecuteActivity(workflow.WithActivityOptions(actx, ao), (*AgentActivities).RunLoopTrainer, training.LoopTrainerInput{
		RunID: in.RunID, Spec: spec, GPUs: alloc.GPUs, Endpoints: in.Endpoints, Port: port, PoolPath: poolPath, Epoch: p.Epoch,
	})
	ended := false
	workflow.Go(ctx, func(ctx workflow.Context) {
		_ = workflow.Await(ctx, func() bool { return *paused || ended })
		if !ended {
			cancel() // the trainer publishes its last whole step first
		}
	})
	err := f.Get(ctx, &st)
	ended = true
	if canceled := (*temporal.CanceledError)(nil); errors.As(err, &canceled) && canceled.HasDetails() {
		_ = canceled.Details(&st)
	}
	if st.Steps > 0 { // a trainer lost with its node reports nothing
		p.Loop = &st
		p.Checkpoint = max(p.Checkpoint, st.Checkpoint)
	}
	if fl.fatal != nil {
		return st, temporal.NewNonRetryableApplicationError(fl.fatal.Error(), ErrTrainingFailed, nil)
	}
	return st, err
}
