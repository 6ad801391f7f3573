// Package job runs one command on a cluster node: it asks the cluster
// workflow for an allocation, runs the process on that node's agent with
// exactly the GPUs it was given, and gives the allocation back. When the
// node dies mid-run the job is placed again elsewhere.
package job

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/workspec"
	"github.com/trainyard/trainyard/workflows/cluster"
)

// Name is the workflow type.
const Name = "Job"

// QueryProgress returns Progress.
const QueryProgress = "progress"

// Input is a job.
type Input struct {
	Cluster  string            `json:"cluster"`
	Command  []string          `json:"command"`
	Env      map[string]string `json:"env,omitempty"`
	CPUs     float64           `json:"cpus"`
	GPUs     int               `json:"gpus"`
	MemoryMB int64             `json:"memory_mb"`
	// MaxPlacements bounds how often a job whose node died is placed again.
	MaxPlacements int `json:"max_placements,omitempty"`
	// InfeasibleGrace is how long a job no node could ever take waits for
	// the cluster to change (a node to join) before it fails (default 5m).
	InfeasibleGrace time.Duration `json:"infeasible_grace,omitempty"`
	// Work, when set, is the job's work description: its roles (each with
	// its own command, Command being the default) are placed as one gang
	// and run together; the job ends when every instance has exited.
	Work *workspec.Spec `json:"work,omitempty"`
}

// Result is how the job ended.
type Result struct {
	Node       string `json:"node"`
	GPUs       []int  `json:"gpus"`
	ExitCode   int    `json:"exit_code"`
	Output     string `json:"output" doc:"The last lines the process printed."`
	Placements int    `json:"placements"`
	// Instances are a gang's role instances: where each ran and how it
	// ended.
	Instances []Instance `json:"instances,omitempty" doc:"A multi-role job's instances: where each ran and how it ended."`
}

// Instance is one role instance of a gang job.
type Instance struct {
	cluster.Assigned
	State string `json:"state" enum:"running,done,failed,stopped"`
	// MaxConcurrency is its role's limit on concurrent work (env, requests)
	// in the instance, handed to it as TRAINYARD_MAX_CONCURRENCY.
	MaxConcurrency int    `json:"max_concurrency,omitempty" doc:"Its role's limit on concurrent work in the instance (TRAINYARD_MAX_CONCURRENCY)."`
	ExitCode       int    `json:"exit_code"`
	Output         string `json:"output,omitempty" doc:"The last lines it printed."`
	Error          string `json:"error,omitempty"`
}

// Progress is what a job is doing now, and why it waits when it waits.
type Progress struct {
	State  string `json:"state" enum:"waiting,infeasible,running,done,failed,cancelled"`
	Node   string `json:"node,omitempty"`
	GPUs   []int  `json:"gpus,omitempty"`
	Reason string `json:"reason,omitempty" doc:"Why it waits: the resource or rule that blocks it on each node; when infeasible, also when it fails unless the cluster changes."`
	// WaitingSince orders the queue (GET /v1/clusters/{name}/queue).
	WaitingSince *time.Time `json:"waiting_since,omitempty" doc:"When it began waiting for a node (unset while placed)."`
	Placements   int        `json:"placements"`
	// Instances are where a gang job's role instances run or ran.
	Instances []Instance `json:"instances,omitempty" doc:"A multi-role job's instances: where each runs or ran, and how it ended."`
}

// Workflow places and runs the job.
func Workflow(ctx workflow.Context, in Input) (Result, error) {
	if in.MaxPlacements <= 0 {
		in.MaxPlacements = 5
	}
	if in.InfeasibleGrace <= 0 {
		in.InfeasibleGrace = 5 * time.Minute
	}
	p := Progress{State: "waiting"}
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (Progress, error) { return p, nil }); err != nil {
		return Result{}, err
	}
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	var exclude []string
	for p.Placements < in.MaxPlacements {
		alloc, err := Place(ctx, Placement{
			Cluster: in.Cluster,
			Request: cluster.AllocateRequest{JobID: id, CPUs: in.CPUs, GPUs: in.GPUs, MemoryMB: in.MemoryMB, Work: in.Work},
			Exclude: func() []string { return exclude },
			Grace:   in.InfeasibleGrace, What: "this job",
			Waiting: Report(ctx, &p.State, &p.Reason, &p.WaitingSince),
		})
		if err != nil {
			if temporal.IsApplicationError(err) {
				p.State = "failed"
			}
			return Result{}, err
		}
		p.Placements++
		p.State, p.Node, p.GPUs, p.Reason, p.WaitingSince = "running", alloc.Node, alloc.GPUs, "", nil
		proc := ProcessInput{Command: in.Command, Env: in.Env, GPUs: alloc.GPUs}
		if in.Work != nil && len(alloc.Assignments) == 1 {
			proc = instanceProcess(in, alloc.Assignments[0])
		}
		if in.Work != nil && len(alloc.Assignments) > 1 {
			res, lost, err := runGang(ctx, in, id, alloc, &p)
			if lost == "" {
				return res, err
			}
			exclude = append(exclude, lost)
			continue
		}

		runCtx := onNode(ctx, alloc.Queue)
		var res Result
		err = workflow.ExecuteActivity(runCtx, (*AgentActivities).RunProcess, proc).Get(ctx, &res)
		_ = workflow.SignalExternalWorkflow(ctx, cluster.WorkflowID(in.Cluster), "", cluster.SignalRelease, cluster.Release{JobID: id}).Get(ctx, nil)
		if err == nil {
			res.Node, res.GPUs, res.Placements = alloc.Node, alloc.GPUs, p.Placements
			p.State = "done"
			return res, nil
		}
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == ErrProcessFailed {
			p.State, p.Reason = "failed", app.Message()
			return Result{}, err
		}
		// The node (or its agent) went away: place the job again elsewhere.
		exclude = append(exclude, alloc.Node)
		p.State, p.Reason = "waiting", "node "+alloc.Node+" lost the job: "+Reason(err)
	}
	p.State = "failed"
	return Result{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("job placed %d times", in.MaxPlacements)+" and lost each time: "+p.Reason, "TooManyPlacements", nil)
}

// runGang runs every role instance of a placed work on its node at once.
// The first instance to fail stops the others and fails the job; a lost
// node stops them too and names the node, so the whole gang is placed
// again (all-or-nothing, like its placement).
func runGang(ctx workflow.Context, in Input, id string, alloc cluster.Allocation, p *Progress) (Result, string, error) {
	gctx, stop := workflow.WithCancel(ctx)
	p.Instances = make([]Instance, len(alloc.Assignments))
	futures := make([]workflow.Future, len(alloc.Assignments))
	for i, a := range alloc.Assignments {
		proc := instanceProcess(in, a)
		proc.Instance = i // its log: logs/jobs/<id>/<i>/
		p.Instances[i] = Instance{Assigned: a, State: "running", MaxConcurrency: in.Work.Role(a.Role).MaxConcurrency}
		futures[i] = workflow.ExecuteActivity(onNode(gctx, a.Queue), (*AgentActivities).RunProcess, proc)
	}
	var failed error
	lost := ""
	sel := workflow.NewSelector(ctx)
	for i := range futures {
		sel.AddFuture(futures[i], func(f workflow.Future) {
			inst := &p.Instances[i]
			var res Result
			err := f.Get(ctx, &res)
			inst.ExitCode, inst.Output = res.ExitCode, res.Output
			var app *temporal.ApplicationError
			switch {
			case err == nil:
				inst.State = "done"
				return
			case temporal.IsCanceledError(err):
				inst.State = "stopped"
				return
			case errors.As(err, &app) && app.Type() == ErrProcessFailed:
				inst.State, inst.Error = "failed", app.Message()
				if failed == nil {
					failed = fmt.Errorf("%s#%d on %s: %w", inst.Role, inst.Instance, inst.Node, err)
				}
			default:
				inst.State, inst.Error = "failed", Reason(err)
				if lost == "" && failed == nil {
					lost = inst.Node
				}
			}
			stop() // all-or-nothing: the rest of the gang stops too
		})
	}
	for range futures {
		sel.Select(ctx)
	}
	// Disconnected: a cancelled job gives its nodes back too.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.SignalExternalWorkflow(dctx, cluster.WorkflowID(in.Cluster), "", cluster.SignalRelease, cluster.Release{JobID: id}).Get(dctx, nil)
	res := Result{Node: alloc.Node, GPUs: alloc.GPUs, Placements: p.Placements, Instances: p.Instances}
	switch {
	case ctx.Err() != nil:
		p.State, p.Reason = "cancelled", "cancelled"
		return res, "", ctx.Err()
	case failed != nil:
		p.State, p.Reason = "failed", failed.Error()
		return res, "", temporal.NewNonRetryableApplicationError(failed.Error(), ErrProcessFailed, nil)
	case lost != "":
		p.State, p.Reason = "waiting", "node "+lost+" lost part of the job; placing the whole job again"
		return res, lost, nil
	}
	p.State = "done"
	return res, "", nil
}

// onNode runs a process on the node whose agent polls queue: once (a lost
// node places the job again instead), heartbeating, for up to a day.
func onNode(ctx workflow.Context, queue string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToStartTimeout: 30 * time.Second,
		StartToCloseTimeout:    24 * time.Hour,
		HeartbeatTimeout:       10 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// instanceProcess is one instance's process: its role's command (or the
// job's), and environment saying who it is and how much it may take on.
func instanceProcess(in Input, a cluster.Assigned) ProcessInput {
	cmd := in.Command
	env := map[string]string{}
	for k, v := range in.Env {
		env[k] = v
	}
	r := in.Work.Role(a.Role)
	if len(r.Command) > 0 {
		cmd = r.Command
	}
	if r.MaxConcurrency > 0 {
		env["TRAINYARD_MAX_CONCURRENCY"] = fmt.Sprint(r.MaxConcurrency)
	}
	env["TRAINYARD_ROLE"], env["TRAINYARD_INSTANCE"] = a.Role, fmt.Sprint(a.Instance)
	return ProcessInput{Command: cmd, Env: env, GPUs: a.GPUs}
}

// Reason is an activity or child error as one line for people: an
// application error's message, or which timeout fired.
func Reason(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return "timed out (" + te.TimeoutType().String() + ")"
	}
	return err.Error()
}
