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
}

// Result is how the job ended.
type Result struct {
	Node       string `json:"node"`
	GPUs       []int  `json:"gpus"`
	ExitCode   int    `json:"exit_code"`
	Output     string `json:"output" doc:"The last lines the process printed."`
	Placements int    `json:"placements"`
}

// Progress is what a job is doing now, and why it waits when it waits.
type Progress struct {
	State  string `json:"state" enum:"waiting,infeasible,running,done,failed"`
	Node   string `json:"node,omitempty"`
	GPUs   []int  `json:"gpus,omitempty"`
	Reason string `json:"reason,omitempty" doc:"Why it waits: the resource or rule that blocks it on each node; when infeasible, also when it fails unless the cluster changes."`
	// WaitingSince orders the queue (GET /v1/clusters/{name}/queue).
	WaitingSince *time.Time `json:"waiting_since,omitempty" doc:"When it began waiting for a node (unset while placed)."`
	Placements   int        `json:"placements"`
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
	allocCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var exclude []string
	for p.Placements < in.MaxPlacements {
		var alloc cluster.Allocation
		var infeasibleSince time.Time
		for {
			err := workflow.ExecuteActivity(allocCtx, (*Activities).Allocate, AllocateInput{Cluster: in.Cluster, Request: cluster.AllocateRequest{
				JobID: id, CPUs: in.CPUs, GPUs: in.GPUs, MemoryMB: in.MemoryMB, Exclude: exclude,
			}}).Get(ctx, &alloc)
			if err == nil {
				break
			}
			// Never wait silently: the reason names what blocks the job,
			// and work that can never fit fails after a grace period.
			p.State, p.Reason = "waiting", reason(err)
			if p.WaitingSince == nil {
				now := workflow.Now(ctx)
				p.WaitingSince = &now
			}
			var app *temporal.ApplicationError
			if errors.As(err, &app) && app.Type() == cluster.ErrInfeasible {
				p.State = "infeasible"
				if infeasibleSince.IsZero() {
					infeasibleSince = workflow.Now(ctx)
				}
				p.Reason += fmt.Sprintf("; fails at %s unless a node that fits joins", infeasibleSince.Add(in.InfeasibleGrace).UTC().Format(time.RFC3339))
				if workflow.Now(ctx).Sub(infeasibleSince) >= in.InfeasibleGrace {
					p.State = "failed"
					return Result{}, temporal.NewNonRetryableApplicationError(
						fmt.Sprintf("no node of cluster %s can ever run this job (waited %v): %s", in.Cluster, in.InfeasibleGrace, app.Message()), cluster.ErrInfeasible, nil)
				}
			} else {
				infeasibleSince = time.Time{}
			}
			if err := workflow.Sleep(ctx, 2*time.Second); err != nil {
				return Result{}, err
			}
		}
		p.Placements++
		p.State, p.Node, p.GPUs, p.Reason, p.WaitingSince = "running", alloc.Node, alloc.GPUs, "", nil

		runCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:              alloc.Queue,
			ScheduleToStartTimeout: 30 * time.Second,
			StartToCloseTimeout:    24 * time.Hour,
			HeartbeatTimeout:       10 * time.Second,
			RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		var res Result
		err := workflow.ExecuteActivity(runCtx, (*AgentActivities).RunProcess, ProcessInput{Command: in.Command, Env: in.Env, GPUs: alloc.GPUs}).Get(ctx, &res)
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
		p.State, p.Reason = "waiting", "node "+alloc.Node+" lost the job: "+reason(err)
	}
	p.State = "failed"
	return Result{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("job placed %d times", in.MaxPlacements)+" and lost each time: "+p.Reason, "TooManyPlacements", nil)
}

func reason(err error) string {
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
