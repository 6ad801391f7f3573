// Package train is the training-run workflow: it holds one allocation on
// a cluster node and runs the built-in learner there in segments of
// checkpoint_every iterations, each ending in a checkpoint in S3. A node
// that dies (or an agent killed mid-segment) costs at most the segment in
// flight: the run is placed again and continues from its latest
// checkpoint. Pause and resume are signals, cancel is workflow
// cancellation, progress is a query.
package train

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/internal/workspec"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/job"
)

// Name is the workflow type.
const Name = "Train"

// Query and signal names.
const (
	QueryProgress = "progress"
	SignalControl = "control"
	// SignalTrialProgress is what a sweep trial (Input.ReportProgress)
	// sends its parent after every segment: a TrialProgress.
	SignalTrialProgress = "trial-progress"
)

// ErrTrainingFailed is the error type of a run that cannot continue.
const ErrTrainingFailed = "TrainingFailed"

// maxHistory bounds the per-iteration metrics the workflow keeps (and the
// query returns); every iteration's metrics are also in its checkpoint.
const maxHistory = 2000

// Input is one run, its plugins resolved to content hashes.
type Input struct {
	RunID        string        `json:"run_id"`
	Spec         training.Spec `json:"spec"`
	EnvPlugin    string        `json:"env_plugin"`
	RewardPlugin string        `json:"reward_plugin,omitempty"`
	// MaxFailures bounds how often a segment may be lost (node death,
	// S3 outage) before the run fails (default 20).
	MaxFailures int `json:"max_failures,omitempty"`
	// InfeasibleGrace: how long a run no node can take waits for the
	// cluster to change before it fails (default 5m).
	InfeasibleGrace time.Duration `json:"infeasible_grace,omitempty"`
	// Endpoints are the definitions of the inference endpoints the spec
	// grants (resolved against the cluster at submission).
	Endpoints []inference.Endpoint `json:"endpoints,omitempty"`
	// SweepTrial: a sweep started the run as one of its trials (placed as
	// kind sweep-trial).
	SweepTrial bool `json:"sweep_trial,omitempty"`
	// ReportProgress: signal the parent (a sweep) each segment's metrics
	// (SignalTrialProgress), so it can stop a weak trial early.
	ReportProgress bool `json:"report_progress,omitempty"`
}

// RunControl is the payload of SignalControl. Action stop (with its
// Reason) comes from a sweep's scheduler just before it cancels the
// trial: the run then ends stopped, not cancelled.
type RunControl struct {
	Action string `json:"action" enum:"pause,resume,stop"`
	Reason string `json:"reason,omitempty"`
}

// TrialProgress is the payload of SignalTrialProgress: the iterations a
// segment trained.
type TrialProgress struct {
	RunID   string            `json:"run_id"`
	Metrics []learner.Metrics `json:"metrics"`
}

// RunRestore records a resume from a checkpoint.
type RunRestore struct {
	Checkpoint int64  `json:"checkpoint"`
	Iteration  int64  `json:"iteration"`
	Node       string `json:"node"`
}

// RunProgress is the run's live state and, once it ends, its result.
type RunProgress struct {
	State  string `json:"state" enum:"waiting,infeasible,running,paused,succeeded,completed,stopped,failed,cancelled" doc:"succeeded: reached target_return (or, without one, ran its iterations); completed: spent its iterations short of target_return; stopped: a sweep's scheduler stopped the trial early (reason says why)."`
	Reason string `json:"reason,omitempty" doc:"Why it waits (the resource or rule that blocks it on each node; when infeasible, also when it fails unless the cluster changes), why it failed, or, when completed, that the target was not reached and the best mean return."`
	// WaitingSince orders the queue (GET /v1/clusters/{name}/queue).
	WaitingSince *time.Time `json:"waiting_since,omitempty" doc:"When it began waiting for a node (unset while placed)."`
	Node         string     `json:"node,omitempty"`
	// Nodes is every node the trainer was placed on, in order: where the
	// run ran stays visible after it ends.
	Nodes      []string `json:"nodes,omitempty" doc:"Every node the trainer was placed on, oldest first (kept after the run ends)."`
	Placements int      `json:"placements"`
	// Epoch numbers the run's writers (checkpoint fencing).
	Epoch    int64 `json:"epoch,omitempty" doc:"The run's current writer: each segment or trainer placed gets a higher epoch, and a checkpoint written by an older one (a partitioned node that kept training) is refused and never becomes the run's."`
	Failures int   `json:"failures" doc:"Segments lost to node deaths or outages, each redone from the latest checkpoint."`
	// LastFailure outlives the wait that follows it: a run that failed
	// and runs again still says why it failed.
	LastFailure string `json:"last_failure,omitempty" doc:"What the latest lost segment died of (kept while the run runs again)."`
	Iteration   int64  `json:"iteration"`
	Timesteps   int64  `json:"timesteps"`
	Checkpoint  int64  `json:"checkpoint" doc:"Sequence number of the latest checkpoint (0: none yet)."`
	// MeanReturn is the mean return of the last 100 episodes.
	MeanReturn float64      `json:"mean_return"`
	BestReturn float64      `json:"best_return"`
	Restores   []RunRestore `json:"restores,omitempty"`
	// Drains counts moves off draining nodes (preemption notice, SIGTERM,
	// drain request): each checkpointed first, so none is a failure.
	Drains  int                 `json:"drains,omitempty" doc:"Times the run moved off a draining node after a just-in-time checkpoint."`
	Metrics []learner.Metrics   `json:"metrics" doc:"Per-iteration metrics, oldest first."`
	Eval    *learner.EvalResult `json:"eval,omitempty" doc:"Deterministic evaluation of the final policy."`
	// Output is the end of a command trainer's output once it exited.
	Output string `json:"output,omitempty" doc:"Command runs: the last lines the trainer printed (live: GET /v1/runs/{id} live_output)."`
	// Ranks is a multi-node command trainer's node per rank.
	Ranks []string `json:"ranks,omitempty" doc:"Multi-node command runs (nodes > 1): the node of each rank, rank 0 first."`
	// Loop is a kind llm run's loop as its trainer last reported it (live:
	// the API reads the activities' heartbeats).
	Loop *training.LoopStatus `json:"loop,omitempty" doc:"Kind llm: the loop as its trainer last reported it: step, loss, trajectories/s, pool depth, drops, time blocked, off-policy lag distribution, the weight version each endpoint serves."`
	// RolloutWorkers are the distributed mode's rollout workers.
	RolloutWorkers []RolloutWorker `json:"rollout_workers,omitempty" doc:"Distributed runs (rollout_workers > 0): each rollout worker's state and node."`
}

// RolloutWorker is one rollout-worker slot of a distributed run.
type RolloutWorker struct {
	Worker      int      `json:"worker"`
	State       string   `json:"state" enum:"waiting,infeasible,running,stopped"`
	Node        string   `json:"node,omitempty"`
	Nodes       []string `json:"nodes,omitempty" doc:"Every node it was placed on, oldest first."`
	Reason      string   `json:"reason,omitempty" doc:"Why it waits, or what happened to its last placement."`
	Placements  int      `json:"placements"`
	Failures    int      `json:"failures" doc:"Placements lost (node death, agent killed, S3 outage); each placed again."`
	LastFailure string   `json:"last_failure,omitempty" doc:"What the latest lost placement died of (kept while it runs again)."`
}

func (p *RunProgress) apply(seg training.SegmentResult) {
	var last int64
	if n := len(p.Metrics); n > 0 {
		last = p.Metrics[n-1].Iteration
	}
	for _, m := range seg.Metrics {
		if m.Iteration > last { // a restore may hand back iterations already seen
			p.Metrics = append(p.Metrics, m)
			last = m.Iteration
			p.best(m.RecentEpisodes, m.RecentReturnMean)
		}
	}
	if n := len(p.Metrics); n > maxHistory {
		p.Metrics = append([]learner.Metrics(nil), p.Metrics[n-maxHistory:]...)
	}
	p.Iteration, p.Timesteps, p.Checkpoint = seg.Iteration, seg.Timesteps, seg.Checkpoint
	p.MeanReturn = seg.MeanReturn
	p.best(seg.Episodes, seg.MeanReturn)
	if seg.RestoredFrom > 0 {
		p.Restores = append(p.Restores, RunRestore{Checkpoint: seg.RestoredFrom, Iteration: seg.Iteration - int64(len(seg.Metrics)), Node: p.Node})
	}
}

// best keeps the highest recent mean return seen at any iteration.
func (p *RunProgress) best(episodes int, mean float64) {
	if episodes > 0 && (p.BestReturn == 0 || mean > p.BestReturn) {
		p.BestReturn = mean
	}
}

// Workflow trains the run to its target or iteration budget.
func Workflow(ctx workflow.Context, in Input) (RunProgress, error) {
	spec := in.Spec // defaulted at submission (every recorded history's is)
	if in.MaxFailures <= 0 {
		in.MaxFailures = 20
	}
	if in.InfeasibleGrace <= 0 {
		// Validated at submission; runs from before the field have none.
		in.InfeasibleGrace, _ = spec.Grace()
	}
	if in.InfeasibleGrace <= 0 {
		in.InfeasibleGrace = 5 * time.Minute
	}
	p := &RunProgress{State: "waiting", Metrics: []learner.Metrics{}}
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (RunProgress, error) { return *p, nil }); err != nil {
		return *p, err
	}
	paused, stopReason := false, ""
	control := func(c RunControl) {
		switch c.Action {
		case "pause":
			paused = true
		case "resume":
			paused = false
		case "stop":
			stopReason = c.Reason
		}
	}
	signals := workflow.GetSignalChannel(ctx, SignalControl)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var c RunControl
			if !signals.Receive(ctx, &c) {
				return
			}
			control(c)
		}
	})

	var alloc *cluster.Allocation
	release := func() {
		if alloc == nil {
			return
		}
		// Disconnected: a cancelled run still gives its node back.
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		_ = workflow.SignalExternalWorkflow(dctx, cluster.WorkflowID(spec.Cluster), "", cluster.SignalRelease, cluster.Release{JobID: in.RunID}).Get(dctx, nil)
		alloc, p.Node = nil, ""
	}
	// left is the node the run just lost or drained off: the cluster may
	// not know yet (a killed agent looks alive until its heartbeats stop,
	// a drain shows with the agent's next beat), so the next allocation
	// asks for any other node first.
	var left []string
	avoid := func(node string) {
		// Versioned: older histories allocated without the exclusion.
		if workflow.GetVersion(ctx, "avoid-left-node", workflow.DefaultVersion, 1) == 1 {
			left = []string{node}
		}
	}
	fl := &fleet{}
	end := func(state string, err error) (RunProgress, error) {
		fl.stop(ctx)
		release()
		p.State = state
		if temporal.IsCanceledError(err) {
			p.State = "cancelled"
			// A stop comes just before the cancel; its signal may still
			// be buffered.
			for c := (RunControl{}); signals.ReceiveAsync(&c); c = (RunControl{}) {
				control(c)
			}
			if stopReason != "" {
				p.State, p.Reason = "stopped", stopReason
				return *p, nil
			}
		}
		return *p, err
	}

	// lost handles a failed segment: fatal errors end the run; a node, its
	// agent or S3 going away gives the node back, and the run continues
	// from its latest checkpoint (done is false then).
	lost := func(err error) (bool, RunProgress, error) {
		if ctx.Err() != nil {
			res, err := end("cancelled", ctx.Err())
			return true, res, err
		}
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == ErrTrainingFailed {
			p.Reason = app.Message()
			res, err := end("failed", temporal.NewNonRetryableApplicationError(app.Message(), ErrTrainingFailed, nil))
			return true, res, err
		}
		p.Failures++
		p.LastFailure = "segment on node " + alloc.Node + " lost: " + job.Reason(err)
		p.Reason = p.LastFailure + "; resuming from checkpoint " + fmt.Sprint(p.Checkpoint)
		avoid(alloc.Node)
		p.State = "waiting" // before release blocks: a query must not see a lost run "running"
		release()
		if p.Failures >= in.MaxFailures {
			res, err := end("failed", temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("run lost %d segments, the last: %s", p.Failures, p.Reason), ErrTrainingFailed, nil))
			return true, res, err
		}
		if err := workflow.Sleep(ctx, 2*time.Second); err != nil {
			res, err := end("cancelled", err)
			return true, res, err
		}
		return false, RunProgress{}, nil
	}

	for {
		if paused {
			fl.stop(ctx)
			release()
			p.State, p.Reason = "paused", "paused by a user; resume to continue from checkpoint "+fmt.Sprint(p.Checkpoint)
			if err := workflow.Await(ctx, func() bool { return !paused }); err != nil {
				return end("cancelled", err)
			}
			p.Reason = ""
		}
		var placed map[int]cluster.Allocation
		if alloc == nil {
			var a cluster.Allocation
			var err error
			// Versioned: older histories placed each role on its own.
			if spec.Distributed() && fl.cancel == nil && workflow.GetVersion(ctx, "distributed-gang", workflow.DefaultVersion, 1) == 1 {
				a, placed, err = placeGang(ctx, in, spec, p, left)
			} else {
				a, err = allocate(ctx, in, spec, p, left)
			}
			if err != nil {
				return end("failed", err)
			}
			alloc, left = &a, nil
			p.Placements++
			p.Node, p.Reason, p.WaitingSince = a.Node, "", nil
			p.Nodes = append(p.Nodes, a.Node)
		}
		p.State = "running"
		p.Epoch = nextEpoch(ctx, p.Epoch)
		o, err := shapes[spec.Shape()](ctx, &placedRun{in: in, spec: spec, alloc: alloc, gang: placed, fl: fl, p: p, paused: &paused})
		switch {
		case err != nil:
			if done, res, ferr := lost(err); done {
				return res, ferr
			}
		case o.drained != "":
			avoid(alloc.Node)
			if err := moveOffDrained(ctx, p, o.drained, o.progressed, release); err != nil {
				return end("cancelled", err)
			}
		case o.end != "":
			return end(o.end, nil)
		}
	}
}

// nextEpoch numbers the next writer of the run's checkpoints: the
// workflow's time in milliseconds, and always above the previous one, so
// a workflow reset (the Web UI's) still gets epochs above those its
// first history handed out. Histories from before fencing write unfenced
// (0).
func nextEpoch(ctx workflow.Context, prev int64) int64 {
	if workflow.GetVersion(ctx, "placement-epoch", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return 0
	}
	return max(prev+1, workflow.Now(ctx).UnixMilli())
}

// trimRollouts drops the fragment names a distributed iteration carries:
// a sweep needs only the numbers.
func trimRollouts(ms []learner.Metrics) []learner.Metrics {
	out := make([]learner.Metrics, len(ms))
	for i, m := range ms {
		m.Rollouts = nil
		out[i] = m
	}
	return out
}

// moveOffDrained gives back a draining node whose agent checkpointed the
// run early: no failure is counted, and the run is placed again. Placed on
// the node again before the cluster learnt it drains, the agent returns at
// once (progressed false): wait a little before asking again.
func moveOffDrained(ctx workflow.Context, p *RunProgress, reason string, progressed bool, release func()) error {
	// Versioned: histories from before drains never took this path.
	_ = workflow.GetVersion(ctx, "drain-moves-run", workflow.DefaultVersion, 1)
	p.Drains++
	p.Reason = fmt.Sprintf("node %s drained (%s): checkpoint %d taken at iteration %d; placing the run again", p.Node, reason, p.Checkpoint, p.Iteration)
	p.State = "waiting" // before release blocks: a query must not see a moving run "running"
	release()
	if progressed {
		return nil
	}
	return workflow.Sleep(ctx, 2*time.Second)
}

// allocate asks the cluster for the trainer's slot until it gets one;
// the reason it waits is always visible, and a run no node could ever
// take fails after the grace period. The nodes in avoid are asked around
// once: when no other node can take the run, they are better than waiting.
func allocate(ctx workflow.Context, in Input, spec training.Spec, p *RunProgress, avoid []string) (cluster.Allocation, error) {
	ws := spec.TrainerWork(in.RunID, runKind(in))
	return placeRun(ctx, in, spec, avoid, &ws, nil, job.Report(ctx, &p.State, &p.Reason, &p.WaitingSince))
}

// placeRun asks for the run's work (the trainer, or its whole gang with
// split) until it is placed, asking around avoid first.
func placeRun(ctx workflow.Context, in Input, spec training.Spec, avoid []string, ws *workspec.Spec, split map[string]cluster.SplitJob, waiting func(string, bool)) (cluster.Allocation, error) {
	return job.Place(ctx, job.Placement{
		Cluster:  spec.Cluster,
		Request:  cluster.AllocateRequest{JobID: in.RunID, CPUs: spec.CPUs, GPUs: spec.GPUs, MemoryMB: spec.MemoryMB, Work: ws, Split: split},
		Exclude:  func() []string { return avoid },
		Fallback: func(error) bool { avoid = nil; return true },
		Grace:    in.InfeasibleGrace, What: "this training run",
		Waiting: waiting,
	})
}

// placeGang places a distributed run whole: the trainer and every rollout
// worker, all or nothing (a run never holds part of the cluster while it
// waits for the rest). Each instance is then held as a job of its own,
// the trainer as the run and worker w as rolloutJobID, so a lost worker
// or trainer is placed again alone. It returns the trainer's allocation
// and each worker's.
func placeGang(ctx workflow.Context, in Input, spec training.Spec, p *RunProgress, avoid []string) (cluster.Allocation, map[int]cluster.Allocation, error) {
	p.rolloutSlots(spec.RolloutWorkers)
	kind := runKind(in)
	ws := spec.RunWork(in.RunID, kind)
	split := map[string]cluster.SplitJob{cluster.InstanceKey(workspec.RoleTrainer, 0): {JobID: in.RunID, Kind: kind}}
	for w := range spec.RolloutWorkers {
		split[cluster.InstanceKey(workspec.RoleRolloutWorker, w)] = cluster.SplitJob{JobID: rolloutJobID(in.RunID, w), Kind: workspec.KindRollout}
	}
	report := job.Report(ctx, &p.State, &p.Reason, &p.WaitingSince)
	a, err := placeRun(ctx, in, spec, avoid, &ws, split, func(why string, infeasible bool) {
		report(why, infeasible)
		for w := range p.RolloutWorkers {
			p.RolloutWorkers[w].State, p.RolloutWorkers[w].Reason = p.State, "placed with the trainer, as one gang: "+why
		}
	})
	if err != nil {
		for w := range p.RolloutWorkers {
			p.RolloutWorkers[w].State = "stopped"
		}
		return a, nil, err
	}
	var trainer cluster.Allocation
	workers := map[int]cluster.Allocation{}
	for _, as := range a.Assignments {
		one := cluster.Allocation{Node: as.Node, Queue: as.Queue, GPUs: as.GPUs}
		switch as.Role {
		case workspec.RoleTrainer:
			trainer = one
			trainer.Assignments = []cluster.Assigned{as} // its address, for a loop's pool
		case workspec.RoleRolloutWorker:
			workers[as.Instance] = one
		}
	}
	return trainer, workers, nil
}

// runKind is the kind the run's trainer is placed as: a sweep's trial
// keeps the kind it was reserved under.
func runKind(in Input) string {
	if in.SweepTrial {
		return workspec.KindSweepTrial
	}
	return workspec.KindTraining
}
