package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/provision"
	"github.com/trainyard/trainyard/internal/resources"
)

// upEnv is a cluster workflow with the batch activities faked: start
// fails for nodes named "bad-…", stop records what it stopped, and the
// node groups' holds are recorded (holds may be nil).
func upEnv(t *testing.T, stopped *[]string, holds *[]HoldLeasesInput) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: Name})
	var mu sync.Mutex
	env.RegisterActivityWithOptions(func(_ context.Context, in StartAgentsInput) ([]AgentResult, error) {
		var out []AgentResult
		for _, n := range in.Nodes {
			r := AgentResult{Node: n.Name, Handle: provision.Handle{Node: n.Name, Kind: "static"}}
			if strings.HasPrefix(n.Name, "bad-") {
				r.Error = "no route to host"
			}
			out = append(out, r)
		}
		return out, nil
	}, activity.RegisterOptions{Name: "StartAgents"})
	env.RegisterActivityWithOptions(func(_ context.Context, in StopAgentsInput) ([]AgentResult, error) {
		mu.Lock()
		defer mu.Unlock()
		var out []AgentResult
		for _, n := range in.Nodes {
			*stopped = append(*stopped, n.Node.Name)
			out = append(out, AgentResult{Node: n.Node.Name})
		}
		return out, nil
	}, activity.RegisterOptions{Name: "StopAgents"})
	env.RegisterActivityWithOptions(func(ctx context.Context, _ LeaseRequest) error {
		return errors.New("unable to find activityType=HoldLease") // judged by beats
	}, activity.RegisterOptions{Name: "HoldLease"})
	env.RegisterActivityWithOptions(func(_ context.Context, in HoldLeasesInput) error {
		mu.Lock()
		defer mu.Unlock()
		if holds != nil {
			*holds = append(*holds, in)
		}
		return nil
	}, activity.RegisterOptions{Name: holdLeases})
	return env
}

// queryStatus is the workflow's status now.
func queryStatus(t *testing.T, env *testsuite.TestWorkflowEnvironment) Status {
	t.Helper()
	var st Status
	v, err := env.QueryWorkflow(QueryStatus)
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil {
		t.Error(err)
	}
	return st
}

func upCommand(names ...string) Command {
	c := spec.Cluster{Name: "lab"}
	for _, n := range names {
		c.Nodes = append(c.Nodes, spec.Node{Name: n})
	}
	return Command{Op: OpUp, Spec: &c}
}

// TestUpRegistersFailsAndStops: `up` starts its nodes in one batch; a
// node whose agent registers is Idle, one that could not be started is
// Failed at once, and one started that never registers is Failed after
// register_timeout and its agent stopped.
func TestUpRegistersFailsAndStops(t *testing.T) {
	var stopped []string
	env := upEnv(t, &stopped, nil)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalCommand, upCommand("n1", "n2", "bad-1")) }, time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalHeartbeat, Heartbeat{Node: "n1", AgentID: "a1", Secret: "s", Seq: 1, Resources: resources.Capacity{CPUs: 4, MemoryMB: 8000}})
	}, 3*time.Second)
	var st Status
	env.RegisterDelayedCallback(func() {
		st = queryStatus(t, env)
		env.SignalWorkflow(SignalCommand, Command{Op: OpDown})
	}, 45*time.Second)
	env.ExecuteWorkflow(Name, State{Name: "lab", Desired: "up", Settings: Settings{JoinSecret: "s", RegisterTimeout: 10 * time.Second, HeartbeatTimeout: time.Minute}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	health := map[string]string{}
	for _, n := range st.Nodes {
		health[n.Name] = string(n.Health) + " " + n.Error
	}
	want := map[string]string{"n1": "Idle ", "n2": "Failed agent started but did not register within 10s", "bad-1": "Failed start agent: no route to host"}
	for name, w := range want {
		if health[name] != w {
			t.Errorf("%s: %q, want %q", name, health[name], w)
		}
	}
	if !slices.Contains(stopped, "n2") || slices.Contains(stopped[:1], "bad-1") {
		t.Errorf("stopped %v before down: want n2 (never registered), not bad-1 (never started)", stopped)
	}
	for _, ev := range []string{"node n1 registered", "node n2: agent started but did not register", "node bad-1 failed to start"} {
		if !slices.ContainsFunc(st.Events, func(e string) bool { return strings.Contains(e, ev) }) {
			t.Errorf("no event %q in %q", ev, st.Events)
		}
	}
}

// TestUpDoesNotHoldOffContinueAsNew: nodes still registering do not keep
// the run from continuing as new. When `up` waited for every registration
// (a command running holds it off), a 1,000-node cluster took 10,000
// signals into one run, Temporal's limit, before it could continue.
func TestUpDoesNotHoldOffContinueAsNew(t *testing.T) {
	var stopped []string
	env := upEnv(t, &stopped, nil)
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalCommand, upCommand(names...)) }, time.Second)
	// The run is past its history limit while the nodes register; a
	// beat wakes the main loop.
	env.RegisterDelayedCallback(func() {
		env.SetCurrentHistoryLength(10_000)
		env.SignalWorkflow(SignalHeartbeat, Heartbeat{Node: "stranger", AgentID: "x", Secret: "s", Seq: 1})
	}, 3*time.Second)
	start := env.Now()
	env.ExecuteWorkflow(Name, State{Name: "lab", Desired: "up", Settings: Settings{JoinSecret: "s", RegisterTimeout: 10 * time.Minute}})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow ended with %v, want continue-as-new", err)
	}
	if took := env.Now().Sub(start); took >= 10*time.Minute {
		t.Fatalf("continued as new after %v: the registrations held it off", took)
	}
}
