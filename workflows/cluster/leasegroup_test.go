package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/resources"
)

// TestClusterAsksItsNodeGroup: a node that registers has its lease held
// by node group 1, not by the cluster's execution; a lease the group
// reports lost makes the node Dead; and a cluster brought down lets its
// leases go before its workflow completes (no group holds a lease of a
// cluster that is gone).
func TestClusterAsksItsNodeGroup(t *testing.T) {
	var stopped []string
	var holds []HoldLeasesInput
	env := upEnv(t, &stopped, &holds)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalCommand, upCommand("n1", "n2")) }, time.Second)
	env.RegisterDelayedCallback(func() {
		for i, n := range []string{"n1", "n2"} {
			env.SignalWorkflow(SignalHeartbeat, Heartbeat{Node: n, AgentID: "a" + n, Secret: "s", Seq: int64(i + 1), Resources: resources.Capacity{CPUs: 4, MemoryMB: 8000}})
		}
	}, 3*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalLeaseEnded, LeaseEnd{Node: "n2", AgentID: "an2", Outcome: leaseLost, Why: "Heartbeat", Timeout: time.Minute})
	}, 10*time.Second)
	var st Status
	env.RegisterDelayedCallback(func() {
		st = queryStatus(t, env)
		env.SignalWorkflow(SignalCommand, Command{Op: OpDown})
	}, 20*time.Second)
	env.ExecuteWorkflow(Name, State{Name: "lab", Desired: "up", Settings: Settings{JoinSecret: "s", RegisterTimeout: time.Minute, HeartbeatTimeout: time.Minute}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, in := range holds {
		if in.Cluster != "lab" || in.Group != 1 || in.Queue == "" {
			t.Errorf("holds sent to %+v: want cluster lab, group 1, a task queue", in)
		}
		for _, h := range in.Holds {
			sent = append(sent, h.Node+"="+h.AgentID)
		}
	}
	// n1 and n2 held; n2's lost (the group dropped it itself); n1 let go at down.
	if want := []string{"n1=an1", "n2=an2", "n1="}; !slices.Equal(sent, want) {
		t.Errorf("holds sent %v, want %v", sent, want)
	}
	health := map[string]string{}
	for _, n := range st.Nodes {
		health[n.Name] = string(n.Health) + " " + n.Error
	}
	if health["n1"] != "Idle " || !strings.HasPrefix(health["n2"], "Dead lease lost: no heartbeat for 1m0s") {
		t.Errorf("health %v: want n1 Idle, n2 Dead with its lease lost", health)
	}
}

// TestNodeGroup: the group renews a lease whose term ended, reports one
// the agent refused to the cluster (once), lets a lease go when the
// cluster says so, and completes when it holds none.
func TestNodeGroup(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	env.RegisterWorkflowWithOptions(LeaseGroup, workflow.RegisterOptions{Name: LeaseGroupName})
	var mu sync.Mutex
	calls := map[string]int{}
	env.RegisterActivityWithOptions(func(ctx context.Context, req LeaseRequest) error {
		mu.Lock()
		calls[req.Node]++
		n := calls[req.Node]
		mu.Unlock()
		switch {
		case req.Node == "n2":
			return temporal.NewNonRetryableApplicationError("lease for another agent", ErrLeaseNotMine, nil)
		case n == 1:
			return nil // its term ended
		}
		<-ctx.Done() // held until let go
		return ctx.Err()
	}, activity.RegisterOptions{Name: "HoldLease"})
	var reported []LeaseEnd
	env.OnSignalExternalWorkflow(mock.Anything, WorkflowID("lab"), "", SignalLeaseEnded, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			mu.Lock()
			defer mu.Unlock()
			reported = append(reported, arg.(LeaseEnd))
			return nil
		})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalLeaseHold, []LeaseHold{{Node: "n1"}}) }, 200*time.Millisecond)
	env.ExecuteWorkflow(LeaseGroupName, LeaseGroupState{Cluster: "lab", Group: 1, Holds: map[string]LeaseHold{
		"n1": {Node: "n1", AgentID: "a1", Timeout: time.Minute},
		"n2": {Node: "n2", AgentID: "a2", Timeout: time.Minute},
	}})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the group did not complete when it held no lease")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	mu.Lock() // the lease let go may still be ending
	defer mu.Unlock()
	if calls["n1"] != 2 || calls["n2"] != 1 {
		t.Errorf("lease activities %v: want n1 twice (renewed), n2 once", calls)
	}
	if len(reported) != 1 || reported[0].Node != "n2" || reported[0].Outcome != leaseRefused {
		t.Errorf("reported %+v: want n2 refused, once", reported)
	}
}

// TestLeaseGroupsFill: nodes fill groups of leaseGroupSize in turn, keep
// their group, and a node let go frees its place for the next.
func TestLeaseGroupsFill(t *testing.T) {
	c := &controller{st: &State{Nodes: map[string]*nodeState{}}, leases: &leases{on: true, groups: true}}
	var nodes []*nodeState
	for i := range 2*leaseGroupSize + 100 {
		n := &nodeState{}
		c.st.Nodes[fmt.Sprint(i)] = n
		nodes = append(nodes, n)
	}
	count := map[int]int{}
	for _, n := range nodes {
		count[c.leaseGroup(n)]++
	}
	if count[1] != leaseGroupSize || count[2] != leaseGroupSize || count[3] != 100 || len(count) != 3 {
		t.Fatalf("groups %v: want %d, %d and 100", count, leaseGroupSize, leaseGroupSize)
	}
	if g := c.leaseGroup(nodes[0]); g != 1 {
		t.Fatalf("a node moved to group %d", g)
	}
	c.setLeaseGroup(nodes[5], 0) // let go
	late := &nodeState{}
	c.st.Nodes["late"] = late
	if g := c.leaseGroup(late); g != 1 {
		t.Fatalf("the next node went to group %d, want 1 (a place freed there)", g)
	}
}
