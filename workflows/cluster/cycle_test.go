package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/resources"
	"github.com/trainyard/trainyard/internal/workspec"
	"github.com/trainyard/trainyard/policies"
)

// allocateBatch asks for every work at once through the scheduling cycle
// and returns, per work, its node or its error's type and message.
func allocateBatch(ctx workflow.Context, st State, works []workspec.Spec) ([]string, error) {
	c := newController(ctx, &st)
	c.cycle.on = true
	c.startCycle(ctx)
	out := make([]string, len(works))
	left := len(works)
	for i := range works {
		workflow.Go(ctx, func(ctx workflow.Context) {
			a, err := c.allocateUpdate(ctx, AllocateRequest{JobID: works[i].Name, Work: &works[i]})
			var app *temporal.ApplicationError
			switch {
			case errors.As(err, &app):
				out[i] = app.Type() + ": " + app.Message()
			case err != nil:
				out[i] = err.Error()
			default:
				out[i] = a.Node
			}
			left--
		})
	}
	err := workflow.Await(ctx, func() bool { return left == 0 })
	return out, err
}

// TestCycleDecidesABatch: asks that arrive together are decided in one
// cycle, with one evaluation of the real bundle for the whole batch, and
// each placement counts for the asks after it: both for the scheduler's
// room (only what fits is placed) and for the bundle's usage rules (two
// trainings of one config asking together cannot both start; the batch's
// snapshot alone would let both pass).
func TestCycleDecidesABatch(t *testing.T) {
	shipped, err := policy.LoadFS(policies.FS)
	if err != nil {
		t.Fatal(err)
	}
	e, err := policy.New(context.Background(), shipped)
	if err != nil {
		t.Fatal(err)
	}
	training := func(id string) workspec.Spec {
		s := jobSpec(id, 1, 0, 100)
		s.Kind, s.Config = workspec.KindTraining, "cartpole"
		return s
	}
	for _, tc := range []struct {
		name  string
		works []workspec.Spec
		want  []string // per work: a node, or a word of its error
	}{
		{"only what fits is placed", []workspec.Spec{jobSpec("j1", 3, 0, 100), jobSpec("j2", 3, 0, 100), jobSpec("j3", 3, 0, 100), jobSpec("j4", 3, 0, 100), jobSpec("j5", 3, 0, 100)},
			[]string{"n", "n", "n", "n", "NoCapacity"}},
		{"one training per config", []workspec.Spec{training("t1"), training("t2"), jobSpec("j1", 1, 0, 100)},
			[]string{"n", "one_training_per_config", "n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(allocateBatch)
			batches := 0
			env.RegisterActivity(&Activities{Decide: func(ctx context.Context, in policy.Input) (policy.Decision, error) {
				return e.Decide(ctx, in)
			}})
			env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
				if info.ActivityType.Name == admitBatch {
					batches++
				}
			})
			capacity := resources.Capacity{CPUs: 8, MemoryMB: 16000}
			node := func() *nodeState {
				return &nodeState{Health: Idle, Reported: capacity, LastBeat: env.Now(), AgentID: "a1"}
			}
			st := State{Name: "lab", Desired: "up", Settings: Settings{JoinSecret: "s"}.withDefaults(), Order: []string{"n1", "n2"},
				Nodes: map[string]*nodeState{"n1": node(), "n2": node()}}
			env.SetStartTime(time.Unix(1_800_000_000, 0))
			env.ExecuteWorkflow(allocateBatch, st, tc.works)
			var got []string
			if err := env.GetWorkflowResult(&got); err != nil {
				t.Fatal(err)
			}
			for i, g := range got {
				if !strings.Contains(g, tc.want[i]) {
					t.Errorf("%s: %q, want %q", tc.works[i].Name, g, tc.want[i])
				}
			}
			if batches != 1 {
				t.Errorf("the bundle was asked %d times, want once for the batch", batches)
			}
		})
	}
}

// BenchmarkCycleDecisions is the cycle's own decision rate with Temporal
// out of the loop: at 1,000 nodes with 2,000 jobs queued ahead, a batch of
// 100 asks placed in one pass, admitted by the real bundle in one
// AdmitBatch, placed again and compared (as decide does before it
// commits). It reports decisions per second.
func BenchmarkCycleDecisions(b *testing.B) {
	shipped, err := policy.LoadFS(policies.FS)
	if err != nil {
		b.Fatal(err)
	}
	e, err := policy.New(context.Background(), shipped)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	st := State{Name: "fleet", Nodes: map[string]*nodeState{}, Queue: map[string]*waiting{}}
	for i := range 1000 {
		name := fmt.Sprintf("n%04d", i)
		capacity := resources.Capacity{CPUs: 32, MemoryMB: 128000}
		if i%4 == 0 {
			capacity.GPUs = []resources.GPU{{Index: 0, Model: "gpu", VRAMMB: 80000}, {Index: 1, Model: "gpu", VRAMMB: 80000}}
		}
		st.Order = append(st.Order, name)
		st.Nodes[name] = &nodeState{Health: Healthy, Reported: capacity, LastBeat: now}
	}
	for i := range 2000 { // queued ahead, too big to fit: each is tried every cycle
		st.Queue[fmt.Sprintf("q%04d", i)] = &waiting{Work: jobSpec(fmt.Sprintf("q%04d", i), 64, 0, 1000), Since: now.Add(-time.Hour), Seen: now}
	}
	c := &controller{st: &st, cycle: &cycle{on: true}}
	acts := &Activities{Decide: e.Decide}
	var asks []*ask
	for i := range 100 {
		w := jobSpec(fmt.Sprintf("j%03d", i), float64(1+i%8), float64(i%3/2), 2000)
		asks = append(asks, &ask{req: AllocateRequest{JobID: w.Name, Work: &w}})
	}
	pp := params.Default()
	b.ResetTimer()
	for b.Loop() {
		plans := c.plan(now, pp, asks)
		batch := c.batchInput(now, pp)
		for i, a := range asks {
			batch.Items = append(batch.Items, BatchItem{Work: policy.WorkInput(a.req.JobID, *a.req.Work, 0), Placement: policy.PlacementInput(plans[i].Assignments)})
		}
		if _, err := acts.AdmitBatch(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		_ = c.plan(now, pp, asks)
	}
	b.ReportMetric(float64(len(asks)*b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// parkedAsk places j1 on the one node, asks for j2 (it waits, and is told
// why at once), and asks for j2 again, which is held open; j1 is released
// after release (never when 0). It returns j2's second answer and how
// long it took.
func parkedAsk(ctx workflow.Context, st State, release time.Duration) (string, error) {
	c := newController(ctx, &st)
	c.cycle.on, c.cycle.parks = true, true
	c.startCycle(ctx)
	ask := func(id string) (string, error) {
		w := jobSpec(id, 3, 0, 100)
		a, err := c.allocateUpdate(ctx, AllocateRequest{JobID: id, Work: &w})
		return a.Node, err
	}
	if n, err := ask("j1"); err != nil || n != "n1" {
		return "", fmt.Errorf("j1: %q, %v", n, err)
	}
	if _, err := ask("j2"); err == nil || !strings.Contains(err.Error(), "needs 3 CPUs") {
		return "", fmt.Errorf("j2's first ask: %v, want told why it waits at once", err)
	}
	if release > 0 {
		workflow.Go(ctx, func(ctx workflow.Context) {
			_ = workflow.Sleep(ctx, release)
			c.releaseAll(workflow.Now(ctx), Release{JobID: "j1"})
		})
	}
	start := workflow.Now(ctx)
	n, err := ask("j2")
	took := workflow.Now(ctx).Sub(start)
	if err != nil {
		return fmt.Sprintf("%v after %v", err, took), nil
	}
	return fmt.Sprintf("%s after %v", n, took), nil
}

// TestParkedAskIsPlacedWhenRoomFrees: waiting work that asks again is held
// open and placed in the cycle after a release frees its room, not when
// it would next ask; with no room it is told why it waits after parkFor.
func TestParkedAskIsPlacedWhenRoomFrees(t *testing.T) {
	for _, tc := range []struct {
		release time.Duration
		want    string
	}{{5 * time.Second, "n1 after 5s"}, {0, "retryable: true) after 20s"}} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.RegisterWorkflow(parkedAsk)
		env.RegisterActivity(&Activities{})
		capacity := resources.Capacity{CPUs: 4, MemoryMB: 16000}
		st := State{Name: "lab", Desired: "up", Settings: Settings{JoinSecret: "s"}.withDefaults(), Order: []string{"n1"},
			Nodes: map[string]*nodeState{"n1": {Health: Idle, Reported: capacity, LastBeat: env.Now(), AgentID: "a1"}}}
		env.ExecuteWorkflow(parkedAsk, st, tc.release)
		var got string
		if err := env.GetWorkflowResult(&got); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(got, tc.want) {
			t.Errorf("release after %v: j2's second ask: %q, want it to end %q", tc.release, got, tc.want)
		}
	}
}

// closingAsk asks for j1 through a cycle whose run is closing (continuing
// as new), with closing-answers-asks on or off, and returns its answer.
func closingAsk(ctx workflow.Context, st State, closeFast bool) (string, error) {
	c := newController(ctx, &st)
	c.cycle.on, c.cycle.closeFast, c.cycle.closing = true, closeFast, true
	c.startCycle(ctx)
	w := jobSpec("j1", 1, 0, 100)
	a, err := c.allocateUpdate(ctx, AllocateRequest{JobID: "j1", Work: &w})
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type(), nil
	}
	return a.Node, err
}

// TestClosingRunAnswersWaitingAsks: asks still waiting for a cycle when the
// run is to continue as new are answered Retry (asked again, they reach
// the next run) instead of decided: under load, deciding them held the
// run open for minutes while signals passed its history limit.
func TestClosingRunAnswersWaitingAsks(t *testing.T) {
	for _, tc := range []struct {
		closeFast bool
		want      string
	}{{false, "n1"}, {true, ErrRetry}} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.RegisterWorkflow(closingAsk)
		env.RegisterActivity(&Activities{})
		capacity := resources.Capacity{CPUs: 4, MemoryMB: 16000}
		st := State{Name: "lab", Desired: "up", Settings: Settings{JoinSecret: "s"}.withDefaults(), Order: []string{"n1"},
			Nodes: map[string]*nodeState{"n1": {Health: Idle, Reported: capacity, LastBeat: env.Now(), AgentID: "a1"}}}
		env.ExecuteWorkflow(closingAsk, st, tc.closeFast)
		var got string
		if err := env.GetWorkflowResult(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("closing-answers-asks %v: %q, want %q", tc.closeFast, got, tc.want)
		}
	}
}
