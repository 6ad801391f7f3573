// Package sweep is the hyper-parameter sweep workflow: a grid over
// hyper-parameters (Ray Tune's grid_search) or random search over
// distributions (tune.uniform, loguniform, randint, choice) expanded into
// trials, each a child Train workflow, at most max_concurrent at a time,
// with a results table as its query. A scheduler (ASHA or the median
// stopping rule) stops weak trials early from the metrics each trial
// signals after every segment. Trials may share GPUs: with gpus_per_trial 0.25 the
// sweep reserves a quarter of one device for each trial before starting
// it, so four trials see the same CUDA_VISIBLE_DEVICES index.
package sweep

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/learner"
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
// completed, stopped, failed, cancelled).
const (
	StatePending = "pending" // not started: over max_concurrent
)

// SweepSpec is a sweep as submitted.
type SweepSpec struct {
	Name string        `json:"name,omitempty" doc:"A label for people; the sweep id is generated."`
	Run  training.Spec `json:"run" doc:"The run every trial starts from (as POST /v1/runs takes it); the grid (or param_space) overrides its fields per trial."`
	// Grid maps a hyper-parameter (or seed-000 knob, or seed) to the
	// values to try; the trials are the cartesian product.
	Grid   map[string][]any `json:"grid,omitempty" doc:"Name → values to try; the trials are the cartesian product (names in alphabetical order, the last varying fastest). Names: PPO hyper-parameters (learning_rate, gamma, hidden, ...; a number for hidden sets every layer's width), seed and the seed-000 knobs (workers, envs_per_worker, episode_length, batch_size). A command trial gets each value substituted for {name} in its command. With search random, every sample is combined with every grid point."`
	Search string           `json:"search,omitempty" enum:"grid,random" doc:"grid (default): one trial per grid point. random: num_samples trials drawn from param_space (times the grid's points, if a grid is given too)."`
	// ParamSpace, NumSamples and SearchSeed are random search's.
	ParamSpace map[string]Distribution `json:"param_space,omitempty" doc:"search random: name (as in grid) → the distribution each trial draws its value from."`
	NumSamples int                     `json:"num_samples,omitempty" minimum:"0" maximum:"256" doc:"search random: how many trials to draw (the trial budget)."`
	SearchSeed uint64                  `json:"search_seed,omitempty" doc:"search random: the sampler's seed; the same seed draws the same trials (0: the server picks one and records it here)."`
	Scheduler  *Scheduler              `json:"scheduler,omitempty" doc:"Stops weak trials early (their runs end stopped), freeing their slots for pending trials. Unset: every trial runs its budget."`

	MaxConcurrent int     `json:"max_concurrent,omitempty" minimum:"0" maximum:"256" doc:"Trials running at once (default 4)."`
	GPUsPerTrial  float64 `json:"gpus_per_trial,omitempty" minimum:"0" maximum:"64" doc:"GPUs per command trial; a fraction shares one device (0.25: four trials per GPU, all seeing the same CUDA_VISIBLE_DEVICES index)."`
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
	Index      int     `json:"index" doc:"Position in trial order, from 1."`
	RunID      string  `json:"run_id" doc:"The trial's training run (GET /v1/runs/{id})."`
	Params     Params  `json:"params"`
	State      string  `json:"state" enum:"pending,waiting,running,paused,succeeded,completed,stopped,failed,cancelled" doc:"completed: the trial spent its iterations short of target_return; stopped: the scheduler stopped it early (reason says at which rung and why)."`
	Reason     string  `json:"reason,omitempty" doc:"Why it waits, why it failed, or why the scheduler stopped it."`
	Node       string  `json:"node,omitempty"`
	GPUs       []int   `json:"gpus,omitempty" doc:"Devices reserved for a GPU-sharing trial."`
	Iteration  int64   `json:"iteration"`
	Timesteps  int64   `json:"timesteps"`
	MeanReturn float64 `json:"mean_return" doc:"Mean return of the last 100 episodes when the trial ended (live while it runs)."`
	BestReturn float64 `json:"best_return"`
	Metric     float64 `json:"metric,omitempty" doc:"The scheduler's metric at the trial's latest iteration, when it is not mean_return."`
	StoppedAt  int64   `json:"stopped_at,omitempty" doc:"Stopped trials: the rung (asha) or iteration (median) the scheduler stopped it at."`
	Checkpoint int64   `json:"checkpoint" doc:"The trial's final checkpoint (0: none)."`
	Error      string  `json:"error,omitempty"`
}

// Results is the sweep's results table, live and at the end.
type Results struct {
	State  string  `json:"state" enum:"running,completed,cancelled"`
	Trials []Trial `json:"trials" doc:"One row per trial, in trial order."`
	// Metric and Mode rank the trials: the scheduler's, else mean_return, max.
	Metric string `json:"metric,omitempty" doc:"What ranks the trials: the scheduler's metric (default mean_return)."`
	Mode   string `json:"mode,omitempty" enum:"max,min"`
	// Best is the finished trial with the best final value.
	Best      int   `json:"best,omitempty" doc:"Index of the succeeded or completed trial with the best final metric (0: none yet)."`
	Ranking   []int `json:"ranking,omitempty" doc:"Trial indexes, best first: trials with a value by it; then stopped ones, the later their stop the higher; then the rest."`
	Pending   int   `json:"pending"`
	Running   int   `json:"running"`
	Succeeded int   `json:"succeeded"`
	Completed int   `json:"completed" doc:"Trials that spent their iterations short of target_return."`
	Stopped   int   `json:"stopped" doc:"Trials the scheduler stopped early."`
	Failed    int   `json:"failed"`
	Cancelled int   `json:"cancelled"`
}

// TrialID is the workflow (and run) id of trial i (from 1) of n.
func TrialID(sweepID string, i, n int) string {
	width := max(2, len(fmt.Sprint(n)))
	return fmt.Sprintf("run-%s-t%0*d", strings.TrimPrefix(sweepID, IDPrefix), width, i)
}

// value is what ranks t: its mean return, or the scheduler's other metric.
func (p *Results) value(t Trial) float64 {
	if p.Metric == "" || p.Metric == DefaultMetric {
		return t.MeanReturn
	}
	return t.Metric
}

// Tally recounts the states, picks the best trial and ranks them all.
func (p *Results) Tally() {
	p.Pending, p.Running, p.Succeeded, p.Completed, p.Stopped, p.Failed, p.Cancelled, p.Best = 0, 0, 0, 0, 0, 0, 0, 0
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
			if p.Best == 0 || better(p.Mode, p.value(t), p.value(p.Trials[p.Best-1])) {
				p.Best = t.Index
			}
		case "stopped":
			p.Stopped++
		case "failed":
			p.Failed++
		case "cancelled":
			p.Cancelled++
		default:
			p.Running++
		}
	}
	p.Ranking = p.rank()
}

// rank orders the trials best first: those with a value (finished, or
// running with a reported iteration) by it; then the stopped ones, a later
// stop first, then by value; then the rest in trial order.
func (p *Results) rank() []int {
	group := func(t Trial) int {
		switch {
		case t.State == "stopped":
			return 1
		case t.State == "succeeded" || t.State == "completed" || (t.Iteration > 0 && t.State != "failed" && t.State != "cancelled"):
			return 0
		}
		return 2
	}
	order := make([]Trial, len(p.Trials))
	copy(order, p.Trials)
	slices.SortStableFunc(order, func(a, b Trial) int {
		ga, gb := group(a), group(b)
		switch {
		case ga != gb:
			return ga - gb
		case ga == 1 && a.StoppedAt != b.StoppedAt:
			return cmp.Compare(b.StoppedAt, a.StoppedAt)
		case ga < 2 && better(p.Mode, p.value(a), p.value(b)):
			return -1
		case ga < 2 && better(p.Mode, p.value(b), p.value(a)):
			return 1
		}
		return a.Index - b.Index
	})
	out := make([]int, len(order))
	for i, t := range order {
		out[i] = t.Index
	}
	return out
}

// report applies a trial run's latest iterations to its row.
func (t *Trial) report(ms []learner.Metrics, metric string) {
	for _, m := range ms {
		if m.Iteration <= t.Iteration {
			continue
		}
		t.Iteration, t.Timesteps = m.Iteration, m.Timesteps
		if m.RecentEpisodes > 0 {
			t.MeanReturn = m.RecentReturnMean
			t.BestReturn = max(t.BestReturn, m.RecentReturnMean)
		}
	}
	t.latest(ms, metric)
}

// latest sets Metric from the last of ms with a value (mean_return is
// MeanReturn's).
func (t *Trial) latest(ms []learner.Metrics, metric string) {
	value, ok := MetricOf(metric)
	if metric == DefaultMetric || !ok {
		return
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if v, ok := value(ms[i]); ok {
			t.Metric = v
			return
		}
	}
}

// metric is what judges and ranks the trials.
func (s SweepSpec) metric() string {
	if s.Scheduler != nil && s.Scheduler.Metric != "" {
		return s.Scheduler.Metric
	}
	return DefaultMetric
}

// Workflow runs every trial to its end (or, with a scheduler, until the
// scheduler stops it) and returns the table. Cancelling it cancels the
// trials that run (and waits for them, so their rows are final) and never
// starts the rest.
func Workflow(ctx workflow.Context, in Input) (Results, error) {
	params := Trials(in.Spec)
	if len(params) == 0 {
		return Results{State: "completed", Trials: []Trial{}}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the sweep has no trials (its grid expands to %d); want 1..%d", Size(in.Spec.Grid), MaxTrials), "InvalidSweep", nil)
	}
	// Versioned: trials started before report their progress only when
	// they end, and no scheduler stops them.
	reports := workflow.GetVersion(ctx, "trial-reports", workflow.DefaultVersion, 1) == 1
	limit := in.Spec.MaxConcurrent
	if limit <= 0 {
		limit = DefaultMaxConcurrent
	}
	p := &Results{State: "running", Trials: make([]Trial, len(params)), Metric: DefaultMetric, Mode: "max"}
	var st *stopper
	if sc := in.Spec.Scheduler; sc != nil && reports {
		d := sc.WithDefaults(int64(in.Spec.Run.WithDefaults().Iterations))
		st, p.Metric, p.Mode = newStopper(d), d.Metric, d.Mode
	}
	byRun := make(map[string]int, len(params))
	for i, pr := range params {
		p.Trials[i] = Trial{Index: i + 1, RunID: TrialID(in.SweepID, i+1, len(params)), Params: pr, State: StatePending}
		byRun[p.Trials[i].RunID] = i
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
	// stops[i] is the scheduler's verdict on trial i, for its coroutine
	// to carry out.
	stops := make([]*Decision, len(params))
	if reports {
		ch := workflow.GetSignalChannel(ctx, train.SignalTrialProgress)
		workflow.Go(ctx, func(gctx workflow.Context) {
			for {
				var r train.TrialProgress
				if !ch.Receive(gctx, &r) {
					return
				}
				i, ok := byRun[r.RunID]
				if !ok {
					continue
				}
				t := &p.Trials[i]
				if t.State == "running" {
					t.report(r.Metrics, in.Spec.metric())
				}
				if st == nil {
					continue
				}
				// Every report counts at the rungs, even one that arrives
				// after its trial ended; only a running trial is stopped.
				if d, stop := st.observe(i, r.Metrics); stop && t.State == "running" && stops[i] == nil {
					stops[i] = &d
				}
			}
		})
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
			runTrial(gctx, in, t, reports, &stops[i])
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
// With reports, the trial's run reports every segment and a scheduler's
// stop (set in *stop by the report handler) is carried out: the run is
// told why, then cancelled, and ends stopped.
func runTrial(ctx workflow.Context, in Input, t *Trial, reports bool, stop **Decision) {
	spec, err := in.Spec.TrialSpec(t.Params)
	if err != nil { // the API validated it; a hand-started sweep may not be
		t.State, t.Error = "failed", err.Error()
		return
	}
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
	cctx, cancel := workflow.WithCancel(ctx)
	f := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(cctx, opts), train.Name, train.Input{
		RunID: t.RunID, Spec: spec, EnvPlugin: in.EnvPlugin, RewardPlugin: in.RewardPlugin, SweepTrial: true, ReportProgress: reports,
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
	if reports {
		// A cancelled sweep's Await returns at once; the child is being
		// cancelled with it.
		_ = workflow.Await(ctx, func() bool { return f.IsReady() || *stop != nil })
		if d := *stop; d != nil && !f.IsReady() {
			// The reason first, so the run ends stopped, not cancelled.
			_ = f.SignalChildWorkflow(ctx, train.SignalControl, train.RunControl{Action: "stop", Reason: d.Reason}).Get(ctx, nil)
			cancel()
		}
	}
	var res train.RunProgress
	err = f.Get(ctx, &res)
	if err == nil {
		t.State, t.Reason = res.State, res.Reason
		t.Node, t.Iteration, t.Timesteps = res.Node, res.Iteration, res.Timesteps
		t.MeanReturn, t.BestReturn, t.Checkpoint = res.MeanReturn, res.BestReturn, res.Checkpoint
		if reports {
			t.latest(res.Metrics, in.Spec.metric())
		}
		if t.State == "" {
			t.State = "succeeded"
		}
		if d := *stop; d != nil && t.State == "stopped" {
			t.StoppedAt = d.Iteration
		}
		return
	}
	if d := *stop; d != nil && temporal.IsCanceledError(err) {
		t.State, t.Reason, t.StoppedAt = "stopped", d.Reason, d.Iteration
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
