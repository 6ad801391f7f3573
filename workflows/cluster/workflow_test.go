package cluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/resources"
)

// allocateAfterSignals allocates the job "run", waits until the signals the
// test sends are received but not yet taken (as when the SDK runs the
// update handler before the main loop gets to them), and allocates it
// again, excluding the nodes given.
func allocateAfterSignals(ctx workflow.Context, st State, signals int, exclude []string) ([]string, error) {
	c := newController(ctx, &st)
	req := AllocateRequest{JobID: "run", CPUs: 1, MemoryMB: 100}
	first, err := c.allocateUpdate(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := workflow.Await(ctx, func() bool { return c.beats.Len()+c.releases.Len() == signals }); err != nil {
		return nil, err
	}
	req.Exclude = exclude
	second, err := c.allocateUpdate(ctx, req)
	if err != nil {
		return nil, err
	}
	return []string{first.Node, second.Node}, nil
}

// TestAllocateTakesBufferedSignalsFirst: a job moving off a node releases
// it and asks for another slot at once. When the allocate update runs
// before the main loop has taken the release (and the heartbeat saying
// the node drains), it must apply them first rather than hand the job back
// the node it left, which an e2e drain test once saw.
func TestAllocateTakesBufferedSignalsFirst(t *testing.T) {
	capacity := resources.Capacity{CPUs: 8, MemoryMB: 16000}
	for _, tc := range []struct {
		name    string
		send    func(env *testsuite.TestWorkflowEnvironment)
		signals int
		exclude []string
	}{
		{"release, the node left excluded", func(env *testsuite.TestWorkflowEnvironment) {
			env.SignalWorkflow(SignalRelease, Release{JobID: "run"})
		}, 1, []string{"n1"}},
		{"drain beat and release", func(env *testsuite.TestWorkflowEnvironment) {
			env.SignalWorkflow(SignalHeartbeat, Heartbeat{Node: "n1", AgentID: "a1", Secret: "s", Resources: capacity, Draining: "preemption notice"})
			env.SignalWorkflow(SignalRelease, Release{JobID: "run"})
		}, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(allocateAfterSignals)
			node := func() *nodeState {
				return &nodeState{Health: Idle, Reported: capacity, LastBeat: env.Now(), AgentID: "a1"}
			}
			st := State{Name: "lab", Desired: "up", Settings: Settings{JoinSecret: "s"}.withDefaults(), Order: []string{"n1", "n2"},
				Nodes: map[string]*nodeState{"n1": node(), "n2": node()}}
			env.RegisterDelayedCallback(func() { tc.send(env) }, time.Second)
			env.ExecuteWorkflow(allocateAfterSignals, st, tc.signals, tc.exclude)
			var got []string
			if err := env.GetWorkflowResult(&got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, []string{"n1", "n2"}) {
				t.Fatalf("allocations on %v, want [n1 n2]: the second must not be the node the job left", got)
			}
		})
	}
}

// TestCancelRequestIsIgnored: a cancel request (the Web UI offers one)
// neither ends the cluster nor makes its loop spin (a cancelled context
// fires every timer at once: it used to run into the history limit and
// continue as new); it is noted, and `down` still ends the workflow.
func TestCancelRequestIsIgnored(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: Name})
	var events []string
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		if err != nil {
			t.Errorf("status after the cancel request: %v", err)
			return
		}
		var st Status
		if err := v.Get(&st); err != nil {
			t.Error(err)
		}
		events = st.Events
		env.SignalWorkflow(SignalCommand, Command{Op: OpDown})
	}, time.Minute)
	// A low history limit: a spinning loop reaches it at once.
	env.ExecuteWorkflow(Name, State{Name: "lab", Desired: "up", Settings: Settings{HistoryLimit: 300}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow ended with %v, want a normal end after down", err)
	}
	if !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, "cancel requested and ignored") }) {
		t.Fatalf("events a minute after the cancel request: %q", events)
	}
}
