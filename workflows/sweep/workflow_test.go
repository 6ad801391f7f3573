package sweep

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/job"
	"github.com/trainyard/trainyard/workflows/train"
)

// fakeTrain stands in for the Train workflow: a trial trains for an hour
// of workflow time, its mean return is 1000 × learning_rate, and a
// learning rate of 0.5 fails. It tracks how many trials run at once.
type fakeTrain struct {
	mu         sync.Mutex
	active     int
	maxActive  int
	inputs     map[string]train.Input
	cancelled  []string
	trainFor   time.Duration
	failReason string
}

func (f *fakeTrain) workflow(ctx workflow.Context, in train.Input) (train.RunProgress, error) {
	f.mu.Lock()
	f.active++
	f.maxActive = max(f.maxActive, f.active)
	f.inputs[in.RunID] = in
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.active--
		f.mu.Unlock()
	}()
	if err := workflow.Sleep(ctx, f.trainFor); err != nil {
		f.mu.Lock()
		f.cancelled = append(f.cancelled, in.RunID)
		f.mu.Unlock()
		return train.RunProgress{State: "cancelled"}, err
	}
	lr, _ := in.Spec.Hyperparameters["learning_rate"].(float64)
	if lr == 0.5 {
		return train.RunProgress{}, temporal.NewNonRetryableApplicationError(f.failReason, train.ErrTrainingFailed, nil)
	}
	return train.RunProgress{State: "succeeded", Node: "n1", Iteration: 20, Timesteps: 20 * 256, MeanReturn: 1000 * lr, BestReturn: 1000 * lr, Checkpoint: 2}, nil
}

func newEnv(t *testing.T, f *fakeTrain) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: Name})
	env.RegisterWorkflowWithOptions(f.workflow, workflow.RegisterOptions{Name: train.Name})
	return env
}

func baseSpec() training.Spec {
	return training.Spec{Cluster: "lab", Env: "cartpole", Iterations: 20, CheckpointEvery: 10}
}

func TestSweepRunsGridAsChildren(t *testing.T) {
	f := &fakeTrain{inputs: map[string]train.Input{}, trainFor: time.Hour, failReason: "diverged: loss is NaN"}
	env := newEnv(t, f)
	in := Input{SweepID: "sweep-abc", EnvPlugin: "sha-env", Spec: SweepSpec{
		Run: baseSpec(), MaxConcurrent: 2,
		Grid: map[string][]any{"learning_rate": {0.1, 0.3, 0.5}, "seed": {1.0, 2.0}},
	}}
	// Mid-way the table shows some trials running and the rest pending.
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryProgress)
		if err != nil {
			t.Errorf("query mid-way: %v", err)
			return
		}
		var p Results
		if err := v.Get(&p); err != nil {
			t.Errorf("decode: %v", err)
			return
		}
		if p.State != "running" || p.Running != 2 || p.Pending != 2 || p.Succeeded != 2 {
			t.Errorf("after 90m: state %s, %d running, %d pending, %d succeeded; want running, 2, 2, 2", p.State, p.Running, p.Pending, p.Succeeded)
		}
	}, 90*time.Minute)
	env.ExecuteWorkflow(Name, in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("sweep did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("sweep failed: %v", err)
	}
	var p Results
	if err := env.GetWorkflowResult(&p); err != nil {
		t.Fatal(err)
	}
	if f.maxActive != 2 {
		t.Errorf("at most %d trials ran at once, want max_concurrent = 2", f.maxActive)
	}
	if len(p.Trials) != 6 || p.State != "completed" || p.Succeeded != 4 || p.Failed != 2 {
		t.Fatalf("table: state %s, %d rows, %d succeeded, %d failed; want completed, 6, 4, 2", p.State, len(p.Trials), p.Succeeded, p.Failed)
	}
	wantIDs := []string{"run-abc-t01", "run-abc-t02", "run-abc-t03", "run-abc-t04", "run-abc-t05", "run-abc-t06"}
	for i, tr := range p.Trials {
		if tr.RunID != wantIDs[i] || tr.Index != i+1 {
			t.Errorf("row %d: id %s index %d, want %s %d", i, tr.RunID, tr.Index, wantIDs[i], i+1)
		}
		in, ok := f.inputs[tr.RunID]
		if !ok {
			t.Errorf("trial %s never started as a child", tr.RunID)
			continue
		}
		if in.Spec.Hyperparameters["learning_rate"] != tr.Params["learning_rate"] || float64(in.Spec.Seed) != tr.Params["seed"].(float64) {
			t.Errorf("trial %s got spec %+v for params %v", tr.RunID, in.Spec, tr.Params)
		}
		if in.EnvPlugin != "sha-env" || in.Spec.Cluster != "lab" || in.Spec.Iterations != 20 {
			t.Errorf("trial %s lost the base run: %+v", tr.RunID, in)
		}
	}
	// Grid order: learning_rate slower than seed.
	if p.Trials[0].Params.String() != "learning_rate=0.1 seed=1" || p.Trials[5].Params.String() != "learning_rate=0.5 seed=2" {
		t.Errorf("grid order: first %s, last %s", p.Trials[0].Params, p.Trials[5].Params)
	}
	if got := p.Trials[4]; got.State != "failed" || !strings.Contains(got.Error, "diverged") {
		t.Errorf("failed trial row: %+v", got)
	}
	if got := p.Trials[2]; got.State != "succeeded" || got.MeanReturn != 300 || got.Iteration != 20 || got.Checkpoint != 2 {
		t.Errorf("succeeded trial row: %+v", got)
	}
	if p.Best != 3 { // learning_rate 0.3, seed 1: the first of the two best
		t.Errorf("best = %d, want 3", p.Best)
	}
}

func TestSweepCancelCancelsTrials(t *testing.T) {
	f := &fakeTrain{inputs: map[string]train.Input{}, trainFor: 10 * time.Hour}
	env := newEnv(t, f)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Hour)
	env.ExecuteWorkflow(Name, Input{SweepID: "sweep-c", Spec: SweepSpec{
		Run: baseSpec(), MaxConcurrent: 2, Grid: map[string][]any{"learning_rate": {0.1, 0.2, 0.3}},
	}})
	if !env.IsWorkflowCompleted() {
		t.Fatal("sweep did not end")
	}
	if err := env.GetWorkflowError(); !temporal.IsCanceledError(err) {
		t.Fatalf("sweep error %v, want cancelled", err)
	}
	if len(f.cancelled) != 2 {
		t.Errorf("cancelled children %v, want the two running trials", f.cancelled)
	}
	if len(f.inputs) != 2 {
		t.Errorf("started %d trials, want 2 (the third was pending)", len(f.inputs))
	}
	v, err := env.QueryWorkflow(QueryProgress)
	if err != nil {
		t.Fatal(err)
	}
	var p Results
	if err := v.Get(&p); err != nil {
		t.Fatal(err)
	}
	if p.State != "cancelled" || p.Cancelled != 3 {
		t.Fatalf("table after cancel: state %s, %d cancelled: %+v", p.State, p.Cancelled, p.Trials)
	}
	if !strings.Contains(p.Trials[2].Reason, "before the trial started") {
		t.Errorf("pending trial's reason: %q", p.Trials[2].Reason)
	}
}

// TestSweepSharesGPUs: with gpus_per_trial 0.25 the sweep reserves a
// quarter GPU under each trial's run id (waiting while the cluster has no
// room) before it starts the trial, which asks for no GPUs itself.
func TestSweepSharesGPUs(t *testing.T) {
	f := &fakeTrain{inputs: map[string]train.Input{}, trainFor: time.Minute}
	env := newEnv(t, f)
	var acts *job.Activities
	env.RegisterActivity(acts)
	var mu sync.Mutex
	var reqs []cluster.AllocateRequest
	busy := 2 // the first two calls find no room
	env.OnActivity(acts.Allocate, mock.Anything, mock.Anything).Return(func(_ context.Context, in job.AllocateInput) (cluster.Allocation, error) {
		mu.Lock()
		defer mu.Unlock()
		reqs = append(reqs, in.Request)
		if busy > 0 {
			busy--
			return cluster.Allocation{}, temporal.NewApplicationError("no node can take the job now: gpu busy", cluster.ErrNoCapacity)
		}
		return cluster.Allocation{Node: "n1", Queue: "node/lab/n1", GPUs: []int{0}}, nil
	})
	cmd := training.Spec{Cluster: "lab", Algorithm: training.AlgorithmCommand, Command: []string{"python", "train.py", "--lr", "{lr}"}}
	env.ExecuteWorkflow(Name, Input{SweepID: "sweep-g", Spec: SweepSpec{
		Run: cmd, GPUsPerTrial: 0.25, Grid: map[string][]any{"lr": {0.1, 0.2}},
	}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var p Results
	if err := env.GetWorkflowResult(&p); err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 4 {
		t.Fatalf("%d allocate calls, want 4 (two refused, one per trial)", len(reqs))
	}
	seen := map[string]bool{}
	for _, r := range reqs {
		if r.GPUShare != 0.25 || r.GPUs != 0 {
			t.Errorf("allocate %+v, want gpu_share 0.25 and no whole GPUs", r)
		}
		seen[r.JobID] = true
	}
	if !seen["run-g-t01"] || !seen["run-g-t02"] {
		t.Errorf("reservations for %v, want the trials' run ids", seen)
	}
	for _, tr := range p.Trials {
		in := f.inputs[tr.RunID]
		if in.Spec.GPUs != 0 {
			t.Errorf("trial %s asks for %d whole GPUs itself", tr.RunID, in.Spec.GPUs)
		}
		if want := "--lr"; in.Spec.Command[2] != want || in.Spec.Command[3] != tr.Params.String()[3:] {
			t.Errorf("trial %s command %q for %s", tr.RunID, in.Spec.Command, tr.Params)
		}
		if tr.State != "succeeded" || len(tr.GPUs) != 1 || tr.GPUs[0] != 0 {
			t.Errorf("row %+v, want succeeded on GPU 0", tr)
		}
	}
}

// TestSweepRejectsEmptyGrid: a sweep started by hand with nothing to run
// fails at once instead of completing with an empty table.
func TestSweepRejectsEmptyGrid(t *testing.T) {
	env := newEnv(t, &fakeTrain{inputs: map[string]train.Input{}})
	env.ExecuteWorkflow(Name, Input{SweepID: "sweep-e", Spec: SweepSpec{Run: baseSpec()}})
	var app *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &app) || app.Type() != "InvalidSweep" {
		t.Fatalf("error %v, want InvalidSweep", err)
	}
}

// TestSweepASHAStopsWeakTrials runs the real Train workflow as each trial
// (its segments and placement mocked): a random search of 6 learning
// rates, 2 at a time, under ASHA (grace 2, factor 3, max_t 18: rungs 2
// and 6). A trial's mean return is learning_rate × 10⁵ × iteration, so
// higher rates are better. Trials report every segment; the scheduler
// stops the weak ones at a rung, their runs end stopped with the reason,
// and their slots go to the pending trials.
func TestSweepASHAStopsWeakTrials(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: Name})
	env.RegisterWorkflowWithOptions(train.Workflow, workflow.RegisterOptions{Name: train.Name})
	jobActs, agentActs := &job.Activities{}, &train.AgentActivities{}
	env.RegisterActivity(jobActs)
	env.RegisterActivity(agentActs)
	env.OnActivity(jobActs.Allocate, mock.Anything, mock.Anything).Return(cluster.Allocation{Node: "n1", Queue: "n1"}, nil)
	env.OnSignalExternalWorkflow(mock.Anything, cluster.WorkflowID("lab"), "", cluster.SignalRelease, mock.Anything).Return(nil)
	var mu sync.Mutex
	segments := map[string]int{}
	env.OnActivity(agentActs.RunSegment, mock.Anything, mock.Anything).After(time.Minute).Return(
		func(_ context.Context, in training.SegmentInput) (training.SegmentResult, error) {
			mu.Lock()
			segments[in.RunID]++
			mu.Unlock()
			lr := in.Spec.Hyperparameters["learning_rate"].(float64)
			from := in.FromCheckpoint * int64(in.Iterations)
			to := min(from+int64(in.Iterations), int64(in.Spec.Iterations))
			var ms []learner.Metrics
			for it := from + 1; it <= to; it++ {
				ms = append(ms, learner.Metrics{Iteration: it, RecentEpisodes: 10, RecentReturnMean: lr * 1e5 * float64(it)})
			}
			last := ms[len(ms)-1]
			return training.SegmentResult{Iteration: to, Checkpoint: in.FromCheckpoint + 1, Metrics: ms, Episodes: 10,
				MeanReturn: last.RecentReturnMean, Done: to == int64(in.Spec.Iterations)}, nil
		})
	base := baseSpec()
	base.Iterations, base.CheckpointEvery = 100, 2
	env.ExecuteWorkflow(Name, Input{SweepID: "sweep-asha", EnvPlugin: "sha", Spec: SweepSpec{
		Run: base.WithDefaults(), MaxConcurrent: 2, Search: SearchRandom, NumSamples: 6, SearchSeed: 3,
		ParamSpace: map[string]Distribution{"learning_rate": {Kind: DistLogUniform, Min: 1e-5, Max: 1e-2}},
		Scheduler:  &Scheduler{Type: SchedulerASHA, GracePeriod: 2, MaxT: 18},
	}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var p Results
	if err := env.GetWorkflowResult(&p); err != nil {
		t.Fatal(err)
	}
	if p.Stopped < 3 || p.Stopped+p.Succeeded != 6 {
		t.Fatalf("%d stopped, %d succeeded; want at least 3 stopped and the rest succeeded: %+v", p.Stopped, p.Succeeded, p.Trials)
	}
	best := p.Trials[0]
	for _, tr := range p.Trials {
		lr := tr.Params["learning_rate"].(float64)
		switch tr.State {
		case "stopped":
			if !strings.HasPrefix(tr.Reason, fmt.Sprintf("stopped by asha at rung %d (mean_return ", tr.StoppedAt)) || (tr.StoppedAt != 2 && tr.StoppedAt != 6) {
				t.Errorf("stopped trial %d: at %d, reason %q", tr.Index, tr.StoppedAt, tr.Reason)
			}
			// The row is the run's own result (its run ended stopped, not cancelled).
			if tr.Checkpoint == 0 {
				t.Errorf("stopped trial %d: no checkpoint, so not its run's result: %+v", tr.Index, tr)
			}
			if tr.Iteration >= 18 || segments[tr.RunID] >= 9 {
				t.Errorf("stopped trial %d trained %d iterations in %d segments", tr.Index, tr.Iteration, segments[tr.RunID])
			}
		case "succeeded":
			if tr.Iteration != 18 || tr.MeanReturn != lr*1e5*18 {
				t.Errorf("finished trial %d: iteration %d, mean return %g; want max_t 18, %g", tr.Index, tr.Iteration, tr.MeanReturn, lr*1e5*18)
			}
		}
		if lr > best.Params["learning_rate"].(float64) {
			best = tr
		}
	}
	if best.State != "succeeded" || p.Best != best.Index || p.Ranking[0] != best.Index {
		t.Errorf("best %d, ranking %v; want the highest learning rate, trial %d (%s)", p.Best, p.Ranking, best.Index, best.State)
	}
	if last := p.Trials[p.Ranking[len(p.Ranking)-1]-1]; last.State != "stopped" {
		t.Errorf("last ranked trial %d is %s, want a stopped one", last.Index, last.State)
	}
}
