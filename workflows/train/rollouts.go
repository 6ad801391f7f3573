package train

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/job"
)

// Distributed rollouts (spec rollout_workers: K > 0). Besides the trainer's
// allocation the run holds K rollout-worker allocations (0 GPUs,
// rollout_cpus each), placed through the same cluster Allocate as the
// trainer, spread over other nodes when they fit. Each slot is a coroutine
// that runs one long RunRollouts activity on its node's queue; the
// activity heartbeats, so a dead node's worker times out and the slot is
// placed again (elsewhere when needed) while the trainer, waiting on S3 for
// that worker's fragment, gets it from the replacement. Weight versions and
// fragments meet only in S3 (internal/training/distributed.go), so neither
// side's restart needs the other's cooperation.

// rolloutHeartbeat: a worker silent this long is presumed dead. As the
// trainer's: at 10 s, a control plane slow to answer heartbeats (seconds,
// on a loaded machine) lost healthy workers.
const rolloutHeartbeat = 20 * time.Second

// fleet is a run's rollout-worker coroutines.
type fleet struct {
	cancel workflow.CancelFunc
	alive  int
	// segCancel cancels the trainer's segment in flight (a worker failed
	// fatally: the trainer would wait for its fragments forever).
	segCancel workflow.CancelFunc
	fatal     error
	// pool is a kind llm run's trajectory pool, where its workers put.
	pool string
}

// start launches one coroutine per worker slot; placed are the workers
// placed with the trainer (its gang), the others place themselves.
func (f *fleet) start(ctx workflow.Context, in Input, spec training.Spec, p *RunProgress, placed map[int]cluster.Allocation) {
	p.rolloutSlots(spec.RolloutWorkers)
	wctx, cancel := workflow.WithCancel(ctx)
	f.cancel = cancel
	for w := range spec.RolloutWorkers {
		f.alive++
		workflow.Go(wctx, func(ctx workflow.Context) {
			defer func() { f.alive-- }()
			a, ok := placed[w]
			f.run(ctx, in, spec, p, w, a, ok)
		})
	}
}

// stop cancels every worker and waits until each gave its node back.
func (f *fleet) stop(ctx workflow.Context) {
	if f.cancel == nil {
		return
	}
	f.cancel()
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.Await(dctx, func() bool { return f.alive == 0 })
	f.cancel = nil
}

// segment runs the trainer's distributed segment, cancellable by a worker
// that fails fatally.
func (f *fleet) segment(ctx, segCtx workflow.Context, in training.SegmentInput, seg *training.SegmentResult) error {
	sctx, cancel := workflow.WithCancel(segCtx)
	f.segCancel = cancel
	defer func() { f.segCancel = nil }()
	return workflow.ExecuteActivity(sctx, (*AgentActivities).RunDistributedSegment, in).Get(ctx, seg)
}

func (f *fleet) fail(err error) {
	if f.fatal == nil {
		f.fatal = err
	}
	if f.segCancel != nil {
		f.segCancel()
	}
}

// rolloutSlots lists k rollout workers, waiting, unless they are listed.
func (p *RunProgress) rolloutSlots(k int) {
	if len(p.RolloutWorkers) != k {
		p.RolloutWorkers = make([]RolloutWorker, k)
		for w := range p.RolloutWorkers {
			p.RolloutWorkers[w] = RolloutWorker{Worker: w, State: "waiting"}
		}
	}
}

func rolloutJobID(run string, w int) string { return fmt.Sprintf("%s/rollout-%d", run, w) }

// run keeps worker w placed and running until ctx is cancelled; it
// starts on a when placed (the gang placed it), else places itself.
func (f *fleet) run(ctx workflow.Context, in Input, spec training.Spec, p *RunProgress, w int, a cluster.Allocation, placed bool) {
	rw := &p.RolloutWorkers[w]
	jobID := rolloutJobID(in.RunID, w)
	maxFailures := in.MaxFailures
	lost := "" // the node the worker was just lost on: it may look alive a while yet
	for {
		var err error
		if !placed {
			a, err = f.allocate(ctx, in, spec, p, w, lost)
		}
		placed = false
		if err != nil {
			if ctx.Err() == nil {
				f.fail(fmt.Errorf("rollout worker %d: %s", w, job.Reason(err)))
			}
			rw.State = "stopped"
			return
		}
		rw.Placements++
		rw.State, rw.Node, rw.Reason = "running", a.Node, ""
		rw.Nodes = append(rw.Nodes, a.Node)
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:              a.Queue,
			ScheduleToStartTimeout: 30 * time.Second,
			StartToCloseTimeout:    30 * 24 * time.Hour,
			HeartbeatTimeout:       rolloutHeartbeat,
			RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		if spec.Kind == training.KindLLM {
			err = workflow.ExecuteActivity(actx, (*AgentActivities).RunLoopRollouts, training.LoopRolloutInput{
				RunID: in.RunID, Spec: spec, EnvPlugin: in.EnvPlugin, Endpoints: in.Endpoints,
				Worker: w, Workers: spec.RolloutWorkers, Pool: f.pool,
			}).Get(ctx, nil)
		} else {
			err = workflow.ExecuteActivity(actx, (*AgentActivities).RunRollouts, training.RolloutInput{
				RunID: in.RunID, Spec: spec, EnvPlugin: in.EnvPlugin, RewardPlugin: in.RewardPlugin,
				Endpoints: in.Endpoints, Worker: w, Start: rw.Placements,
			}).Get(ctx, nil)
		}
		node := rw.Node
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		_ = workflow.SignalExternalWorkflow(dctx, cluster.WorkflowID(spec.Cluster), "", cluster.SignalRelease, cluster.Release{JobID: jobID}).Get(dctx, nil)
		rw.Node = ""
		if ctx.Err() != nil {
			rw.State = "stopped"
			return
		}
		var app *temporal.ApplicationError
		switch {
		case err == nil:
			// The trainer said the run ended; it is stopped next unless a
			// restarted trainer goes on (then this worker is needed again).
			rw.Reason = "the trainer ended the run"
		case errors.As(err, &app) && app.Type() == ErrTrainingFailed:
			rw.State = "stopped"
			f.fail(fmt.Errorf("rollout worker %d on node %s: %s", w, node, app.Message()))
			return
		default:
			rw.Failures++
			rw.LastFailure = "lost on node " + node + ": " + job.Reason(err)
			rw.Reason = rw.LastFailure + "; placing it again"
			// Versioned: older histories placed it again without avoiding the node.
			if workflow.GetVersion(ctx, "rollout-avoid-lost-node", workflow.DefaultVersion, 1) == 1 {
				lost = node
			}
			if rw.Failures >= maxFailures {
				rw.State = "stopped"
				f.fail(fmt.Errorf("rollout worker %d lost %d placements, the last: %s", w, rw.Failures, rw.Reason))
				return
			}
		}
		rw.State = "waiting"
		if err := workflow.Sleep(ctx, 2*time.Second); err != nil {
			rw.State = "stopped"
			return
		}
	}
}

// allocate places worker w: first off the node it was just lost on and
// the nodes the trainer and the other workers use (a node's death then
// costs one role), else anywhere that fits. Like the trainer's, it waits
// with its reason shown and gives up after the infeasible grace.
func (f *fleet) allocate(ctx workflow.Context, in Input, spec training.Spec, p *RunProgress, w int, lost string) (cluster.Allocation, error) {
	rw := &p.RolloutWorkers[w]
	ws := spec.RolloutWork(rolloutJobID(in.RunID, w))
	return job.Place(ctx, job.Placement{
		Cluster: spec.Cluster,
		Request: cluster.AllocateRequest{JobID: rolloutJobID(in.RunID, w), CPUs: spec.RolloutCPUs, MemoryMB: spec.MemoryMB, Work: &ws},
		Exclude: func() []string {
			var busy []string
			if lost != "" {
				busy = append(busy, lost)
			}
			if p.Node != "" {
				busy = append(busy, p.Node)
			}
			for _, o := range p.RolloutWorkers {
				if o.Worker != w && o.Node != "" {
					busy = append(busy, o.Node)
				}
			}
			return busy
		},
		Fallback: func(error) bool { return true },
		Grace:    in.InfeasibleGrace, What: fmt.Sprintf("rollout worker %d", w),
		Waiting: job.Report(ctx, &rw.State, &rw.Reason, nil),
	})
}
