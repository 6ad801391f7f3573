package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/agent/hollow"
	"github.com/trainyard/trainyard/internal/agent/procenv"
	"github.com/trainyard/trainyard/internal/logstream"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/workflows/cluster"
)

// ErrProcessFailed is the error type of a process that exited non-zero.
const ErrProcessFailed = "ProcessFailed"

// Activities run on the control-plane worker.
type Activities struct {
	Client client.Client
	// Params are the placement params of the policy bundle in force
	// (GPUs reserved for inference, capacity share...); Allocate sends
	// them with each request. Nil: the cluster uses the shipped defaults.
	Params func() params.Params
}

// AllocateInput names the cluster and what the job needs.
type AllocateInput struct {
	Cluster string                  `json:"cluster"`
	Request cluster.AllocateRequest `json:"request"`
}

// Allocate asks the cluster workflow for a node (a workflow update, so the
// answer is synchronous and the decision is recorded in its history).
func (a *Activities) Allocate(ctx context.Context, in AllocateInput) (alloc cluster.Allocation, err error) {
	start := time.Now()
	defer func() { placementMetrics().observe(ctx, in.Cluster, in.Request.JobID, time.Since(start), err) }()
	if a.Params != nil && len(in.Request.Params) == 0 {
		if in.Request.Params, err = json.Marshal(a.Params()); err != nil {
			return cluster.Allocation{}, fmt.Errorf("allocate %s: policy params: %w", in.Request.JobID, err)
		}
	}
	// The cluster gives the allocation back once this workflow has closed,
	// however it ends.
	in.Request.Owner = activity.GetInfo(ctx).WorkflowExecution.ID
	// Admission (a work's usage rules on the live ledger) is the cluster
	// workflow's: it decides and commits in one step (cluster.Activities.Admit).
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		alloc, err = a.update(ctx, in)
		if !askAgain(err) {
			return alloc, err
		}
		select {
		case <-ctx.Done():
			return alloc, err
		case <-time.After(wait + time.Duration(rand.Int64N(int64(wait)))):
		}
	}
}

func (a *Activities) update(ctx context.Context, in AllocateInput) (alloc cluster.Allocation, err error) {
	h, err := a.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   cluster.WorkflowID(in.Cluster),
		UpdateName:   cluster.UpdateAllocate,
		Args:         []any{in.Request},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return cluster.Allocation{}, fmt.Errorf("cluster %s: %w", in.Cluster, err)
	}
	err = h.Get(ctx, &alloc)
	return alloc, err
}

// askAgain says whether an allocate update was turned away before the
// cluster decided it: its run is continuing as new (cluster.ErrRetry), or
// Temporal holds as many of its updates in flight as it allows
// (history.maxInFlightUpdates). Asked again at once, it is decided.
func askAgain(err error) bool {
	var app *temporal.ApplicationError
	var busy *serviceerror.ResourceExhausted
	return errors.As(err, &app) && app.Type() == cluster.ErrRetry || errors.As(err, &busy)
}

// AgentActivities run on a node's agent.
type AgentActivities struct {
	// Dir is where job processes start.
	Dir string
	// Logs is the bucket a process's output streams to as it runs
	// (internal/logstream); nil keeps only the tail in the result.
	Logs *objstore.Store
	// User, when set (the agent's --job-user), runs every process as that
	// account in a private directory of its own instead of Dir.
	User *procenv.User
	// Hollow runs a simulated node's jobs: no process, the command played
	// out as a plan (see internal/agent/hollow).
	Hollow bool
}

// ProcessInput is one process with its GPUs.
type ProcessInput struct {
	Command []string          `json:"command"`
	Env     map[string]string `json:"env,omitempty"`
	GPUs    []int             `json:"gpus"`
	// Instance is which of the job's instances this is (its log:
	// logstream.JobPrefix).
	Instance int `json:"instance,omitempty"`
}

// RunProcess runs the command in its own process group with a minimal
// environment and CUDA_VISIBLE_DEVICES set to exactly its GPUs, heartbeating
// until it exits; a cancelled activity stops the process. A hollow agent
// plays the command out instead (runHollow).
func (a *AgentActivities) RunProcess(ctx context.Context, in ProcessInput) (Result, error) {
	if len(in.Command) == 0 {
		return Result{}, temporal.NewNonRetryableApplicationError("empty command", ErrProcessFailed, nil)
	}
	env, err := procenv.Build(os.Environ(), procenv.Spec{Extra: in.Env, GPUs: in.GPUs})
	if err != nil {
		return Result{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrProcessFailed, err)
	}
	if a.Hollow {
		return a.runHollow(ctx, in)
	}
	path, err := exec.LookPath(in.Command[0])
	if err != nil {
		return Result{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("command %q: %v", in.Command[0], err), ErrProcessFailed, err)
	}
	out, stdout, closeLog := a.openLog(ctx, in)
	defer closeLog()
	dir := a.Dir
	if a.User != nil {
		var remove func()
		if dir, env, remove, err = a.User.Workdir(env); err != nil {
			return Result{}, err
		}
		defer remove()
	}
	p, err := procenv.Start(procenv.Command{Path: path, Args: in.Command[1:], Env: env, Dir: dir, Stdout: stdout, Stderr: stdout, User: a.User})
	if err != nil {
		return Result{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrProcessFailed, err)
	}
	beat := time.NewTicker(2 * time.Second)
	defer beat.Stop()
	for {
		select {
		case <-p.Done():
			err := p.Wait()
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				return exited(in, out.String(), exit.ExitCode(), err)
			}
			return Result{Output: out.String()}, err
		case <-beat.C:
			activity.RecordHeartbeat(ctx, p.Pid())
		case <-ctx.Done():
			_ = p.Stop(5 * time.Second)
			return Result{Output: out.String()}, ctx.Err()
		}
	}
}

// runHollow is RunProcess on a simulated node: the command is read as a
// plan (internal/agent/hollow) that prints, sleeps and exits as told,
// reported exactly as a real process would be.
func (a *AgentActivities) runHollow(ctx context.Context, in ProcessInput) (Result, error) {
	plan, err := hollow.Parse(in.Command)
	if err != nil {
		return Result{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrProcessFailed, err)
	}
	out, stdout, closeLog := a.openLog(ctx, in)
	defer closeLog()
	_, _ = io.WriteString(stdout, plan.Output) // as a process's: Tee warns itself
	if err := hollow.Run(ctx, plan, 2*time.Second, func() { activity.RecordHeartbeat(ctx, 0) }); err != nil {
		return Result{Output: out.String()}, err
	}
	if plan.ExitCode != 0 {
		return exited(in, out.String(), plan.ExitCode, fmt.Errorf("exit status %d", plan.ExitCode))
	}
	return Result{Output: out.String()}, nil
}

// openLog is where a process's output goes: its tail, for the result, and
// its log in the bucket (trainyard logs); closeLog uploads the rest.
func (a *AgentActivities) openLog(ctx context.Context, in ProcessInput) (tail *procenv.Tail, w io.Writer, closeLog func()) {
	tail = &procenv.Tail{Max: 8 << 10}
	info := activity.GetInfo(ctx)
	w, closeLog = logstream.Tee(ctx, a.Logs, logstream.JobPrefix(info.WorkflowExecution.ID, in.Instance), info.ActivityID, tail, activity.GetLogger(ctx))
	return tail, w, closeLog
}

// exited is a process that exited with a non-zero code: its result, and
// the non-retryable failure that names it and its last line.
func exited(in ProcessInput, output string, code int, cause error) (Result, error) {
	res := Result{Output: output, ExitCode: code}
	return res, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("%s exited with code %d: %s", in.Command[0], code, procenv.LastLine(output)), ErrProcessFailed, cause)
}
