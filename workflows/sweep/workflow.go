// Package sweep is the hyper-parameter sweep workflow: a grid over
// hyper-parameters (Ray Tune's grid_search) expanded into trials, each a
// child Train workflow, at most max_concurrent at a time, with a results
// table as its query. Trials may share GPUs: with gpus_per_trial 0.25 the
// sweep reserves a quarter of one device for each trial before starting
// it, so four trials see the same CUDA_VISIBLE_DEVICES index.
package sweep

import (
	"fmt"
	"math"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/internal/workspec"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/job"
	"github.com/trainyard/trainyard/workflows/pluginrun"
	"github.com/trainyard/trainyard/workflows/train"
)

// Name is the workflow type.
const Name = "Sweep"

// QueryProgress returns the results table.
const QueryProgress = "progress"

// IDPrefix marks sweep workflow ids (sweep-<uuid>); trials are training
// runs like any other, run-<uuid>-t<NN>, so every run route serves them.
const IDPrefix = "sweep-"

// infeasibleGrace is how long a GPU-sharing trial no node can take waits
// for the cluster to change before it fails (a run's default).
const infeasibleGrace = 5 * time.Minute

// DefaultMaxConcurrent bounds the trials running at once when the spec
// leaves it unset.
const DefaultMaxConcurrent = 4

// Trial states besides train's own (waiting, running, paused, succeeded,
// failed, cancelled).
const (
	StatePending = "pending" // not started: over max_concurrent
)

// SweepSpec is a sweep as submitted.
type SweepSpec struct {
	Name string        `json:"name,omitempty" doc:"A label for people; the sweep id is generated."`
	Run  training.Spec `json:"run" doc:"The run every trial starts from (as POST /v1/runs takes it); the grid overrides its fields per trial."`
	// Grid maps a hyper-parameter (or seed-000 knob, or seed) to the
	// values to try; the trials are the cartesian product.
	Grid          map[string][]any `json:"grid" doc:"Name → values to try; the trials are the cartesian product (names in alphabetical order, the last varying fastest). Names: PPO hyper-parameters (learning_rate, gamma, hidden, ...; a number for hidden sets every layer's width), seed and the seed-000 knobs (workers, envs_per_worker, episode_length, batch_size). A command trial gets each value substituted for {name} in its command."`
	MaxConcurrent int              `json:"max_concurrent,omitempty" minimum:"0" maximum:"256" doc:"Trials running at once (default 4)."`
	GPUsPerTrial  float64          `json:"gpus_per_trial,omitempty" minimum:"0" maximum:"64" doc:"GPUs per command trial; a fraction shares one device (0.25: four trials per GPU, all seeing the same CUDA_VISIBLE_DEVICES index)."`
}

// Input is one sweep, its plugins resolved to content hashes.
type Input struct {
	SweepID      string    `json:"sweep_id"`
	Spec         SweepSpec `json:"spec"`
	EnvPlugin    string    `json:"env_plugin,omitempty"`
	RewardPlugin string    `json:"reward_plugin,omitempty"`
	Plugins      []string  `json:"plugins,omitempty"` // for the trials' TrainyardPlugins search attribute
}

// Trial is one row of the results table.
type Trial struct {
	Index      int     `json:"index" doc:"Position in grid order, from 1."`
	RunID      string  `json:"run_id" doc:"The trial's training run (GET /v1/runs/{id})."`
	Params     Params  `json:"params"`
	State      string  `json:"state" enum:"pending,waiting,running,paused,succeeded,completed,failed,cancelled" doc:"completed: the trial spent its iterations short of target_return."`
	Reason     string  `json:"reason,omitempty" doc:"Why it waits, or why it failed."`
	Node       string  `json:"node,omitempty"`
	GPUs       []int   `json:"gpus,omitempty" doc:"Devices reserved for a GPU-sharing trial."`
	Iteration  int64   `json:"iteration"`
	Timesteps  int64   `json:"timesteps"`
	MeanReturn float64 `json:"mean_return" doc:"Mean return of the last 100 episodes when the trial ended (live while it runs)."`
	BestReturn float64 `json:"best_return"`
	Checkpoint int64   `json:"checkpoint" doc:"The trial's final checkpoint (0: none)."`
	Error      string  `json:"error,omitempty"`
}

// Results is the sweep's results table, live and at the end.
type Results struct {
	State  string  `json:"state" enum:"running,completed,cancelled"`
	Trials []Trial `json:"trials" doc:"One row per trial, in grid order."`
	// Best is the finished trial with the highest final mean return.
	Best      int `json:"best,omitempty" doc:"Index of the succeeded or completed trial with the highest final mean return (0: none yet)."`
	Pending   int `json:"pending"`
	Running   int `json:"running"`
	Succeeded int `json:"succeeded"`
	Completed int `json:"completed" doc:"Trials that spent their iterations short of target_return."`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
}

// TrialID is the workflow (and run) id of trial i (from 1) of n.
func TrialID(sweepID string, i, n int) string {
	width := max(2, len(fmt.Sprint(n)))
	return fmt.Sprintf("run-%s-t%0*d", strings.TrimPrefix(sweepID, IDPrefix), width, i)
}

// Tally recounts the states and picks the best trial.
func (p *Results) Tally() {
	p.Pending, p.Running, p.Succeeded, p.Completed, p.Failed, p.Cancelled, p.Best = 0, 0, 0, 0, 0, 0, 0
	best := math.Inf(-1)
	for _, t := range p.Trials {
		switch t.State {
		case StatePending:
			p.Pending++
		case "succeeded", "completed":
			if t.State == "succeeded" {
				p.Succeeded++
			} else {
				p.Completed++
			}
			if t.MeanReturn > best {
				best, p.Best = t.MeanReturn, t.Index
			}
		case "failed":
			p.Failed++
		case "cancelled":
			p.Cancelled++
		default:
			p.Running++
		}
	}
}

// Workflow runs every trial of the grid to its end and returns the table.
// Cancelling it cancels the trials that run (and waits for them, so their
// rows are final) and never starts the rest.
func Workflow(ctx workflow.Context, in Input) (Results, error) {
	params := Expand(in.Spec.Grid)
	if len(params) == 0 {
		return Results{State: "completed", Trials: []Trial{}}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("grid expands to %d trials; want 1..%d", Size(in.Spec.Grid), MaxTrials), "InvalidSweep", nil)
	}
	limit := in.Spec.MaxConcurrent
	if limit <= 0 {
		limit = DefaultMaxConcurrent
	}
	p := &Results{State: "running", Trials: make([]Trial, len(params))}
	for i, pr := range params {
		p.Trials[i] = Trial{Index: i + 1, RunID: TrialID(in.SweepID, i+1, len(params)), Params: pr, State: StatePending}
	}
	p.Tally()
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (Results, error) {
		// Counts are tallied here: trials change state inside their own
		// coroutines.
		q := *p
		q.Tally()
		return q, nil
	}); err != nil {
		return *p, err
	}

	running := 0
	for i := range p.Trials {
		if err := workflow.Await(ctx, func() bool { return running < limit }); err != nil {
			break // cancelled: start no more
		}
		running++
		t := &p.Trials[i]
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer func() { running--; p.Tally() }()
			runTrial(gctx, in, t)
		})
		p.Tally()
	}
	// The running trials finish (or finish cancelling) before the table is
	// final; a cancelled ctx would not wait, so wait disconnected.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.Await(dctx, func() bool { return running == 0 })
	for i := range p.Trials {
		if p.Trials[i].State == StatePending {
			p.Trials[i].State, p.Trials[i].Reason = "cancelled", "sweep cancelled before the trial started"
		}
	}
	p.Tally()
	if ctx.Err() != nil {
		p.State = "cancelled"
		return *p, temporal.NewCanceledError()
	}
	p.State = "completed"
	return *p, nil
}

// runTrial starts one trial as a child Train workflow and records its end.
func runTrial(ctx workflow.Context, in Input, t *Trial) {
	spec, err := TrialSpec(in.Spec.Run, t.Params)
	if err != nil { // the API validated it; a hand-started sweep may not be
		t.State, t.Error = "failed", err.Error()
		return
	}
	spec = WithGPUs(spec, in.Spec.GPUsPerTrial)
	if in.Spec.Name != "" {
		spec.Name = in.Spec.Name + " " + t.Params.String()
	} else {
		spec.Name = in.SweepID + " " + t.Params.String()
	}
	t.State = "waiting"
	reserved := false
	if f := in.Spec.GPUsPerTrial; f > 0 && f < 1 {
		a, err := reserve(ctx, spec, f, t)
		if err != nil {
			t.State, t.Reason, t.Error = "failed", "", job.Reason(err)
			if ctx.Err() != nil {
				t.State, t.Error = "cancelled", ""
			}
			return
		}
		reserved = true
		t.Node, t.GPUs, t.Reason = a.Node, a.GPUs, ""
	}
	opts := workflow.ChildWorkflowOptions{
		WorkflowID: t.RunID,
		// A sweep that is cancelled, fails or is terminated stops its
		// trials; cancelling them (not terminating) lets each give its
		// node back and keep its checkpoints.
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation: true,
		Memo:                map[string]any{"name": spec.Name, "cluster": spec.Cluster, "env": spec.Env, "sweep": in.SweepID},
	}
	if len(in.Plugins) > 0 {
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(pluginrun.SearchAttribute.ValueSet(in.Plugins))
	}
	f := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts), train.Name, train.Input{
		RunID: t.RunID, Spec: spec, EnvPlugin: in.EnvPlugin, RewardPlugin: in.RewardPlugin, SweepTrial: true,
	})
	if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		if reserved {
			release(ctx, spec.Cluster, t.RunID)
		}
		t.State, t.Error = "failed", "start trial: "+job.Reason(err)
		if temporal.IsCanceledError(err) {
			t.State, t.Error = "cancelled", ""
		}
		return
	}
	t.State = "running"
	var res train.RunProgress
	err = f.Get(ctx, &res)
	if err == nil {
		t.State, t.Reason = res.State, res.Reason
		t.Node, t.Iteration, t.Timesteps = res.Node, res.Iteration, res.Timesteps
		t.MeanReturn, t.BestReturn, t.Checkpoint = res.MeanReturn, res.BestReturn, res.Checkpoint
		if t.State == "" {
			t.State = "succeeded"
		}
		return
	}
	// A failed or cancelled child returns no result: its last progress is
	// its own query's (the API shows it); the row keeps why.
	t.State, t.Error = "failed", job.Reason(err)
	if temporal.IsCanceledError(err) {
		t.State, t.Error = "cancelled", ""
	}
}

// reserve holds part of one GPU for the trial under the trial's own run id
// before the trial starts: the cluster's allocate is idempotent per job,
// so the trial's Train workflow is handed this very allocation (and gives
// it back when it ends). Waits, with the reason on the row, until a node
// has room.
func reserve(ctx workflow.Context, spec training.Spec, share float64, t *Trial) (cluster.Allocation, error) {
	spec = spec.WithDefaults()
	// Like a run, a trial no node could ever take waits a while for the
	// cluster to change (a dead GPU node coming back) first; a sweep may
	// wait hours for a busy cluster, and each poll is history, so it backs
	// off.
	return job.Place(ctx, job.Placement{
		Cluster: spec.Cluster,
		Request: cluster.AllocateRequest{JobID: t.RunID, CPUs: spec.CPUs, MemoryMB: spec.MemoryMB, GPUShare: share, Work: trialWork(spec, share, t.RunID)},
		Grace:   infeasibleGrace, Backoff: true, What: fmt.Sprintf("this trial (%g of a GPU)", share),
		Waiting: func(why string, _ bool) { t.Reason = why },
	})
}

// trialWork is a trial's work description: its trainer with share of one
// GPU, kind sweep-trial (a trial is training, but one of many at once).
func trialWork(spec training.Spec, share float64, runID string) *workspec.Spec {
	ws := spec.TrainerWork(runID, workspec.KindSweepTrial)
	ws.Roles[0].GPUs = share
	return &ws
}

// release gives back a reservation whose trial never started.
func release(ctx workflow.Context, clusterName, runID string) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.SignalExternalWorkflow(dctx, cluster.WorkflowID(clusterName), "", cluster.SignalRelease, cluster.Release{JobID: runID}).Get(dctx, nil)
}
