package cluster

import (
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/resources"
	"github.com/trainyard/trainyard/internal/workspec"
)

// TestSplitGang: a distributed run's trainer and rollout workers are
// placed all or nothing, spread over the nodes; each instance is then held
// as its own job, so a worker's release gives back its share alone, a
// retried request gets the whole gang back, and the ledger counts the
// workers as rollouts (one training running, not three).
func TestSplitGang(t *testing.T) {
	node := func() *nodeState {
		return &nodeState{Health: Idle, Reported: resources.Capacity{CPUs: 2, MemoryMB: 4000}}
	}
	c := &controller{st: &State{Name: "lab", Order: []string{"a", "b"}, Nodes: map[string]*nodeState{"a": node(), "b": node()}}}
	ws := workspec.Spec{Name: "run", Kind: workspec.KindTraining, Config: "cfg",
		Roles: []workspec.Role{
			{Name: workspec.RoleTrainer, Count: 1, CPUs: 0.5, MemoryMB: 100, Group: "run"},
			{Name: workspec.RoleRolloutWorker, Count: 2, CPUs: 1, MemoryMB: 100, Group: "run"},
		},
		Groups: []workspec.Group{{Name: "run", Strategy: workspec.Spread}}}
	req := AllocateRequest{JobID: "run", Work: &ws, Split: map[string]SplitJob{
		InstanceKey(workspec.RoleTrainer, 0):       {JobID: "run", Kind: workspec.KindTraining},
		InstanceKey(workspec.RoleRolloutWorker, 0): {JobID: "run/rollout-0", Kind: workspec.KindRollout},
		InstanceKey(workspec.RoleRolloutWorker, 1): {JobID: "run/rollout-1", Kind: workspec.KindRollout},
	}}
	now := time.Unix(1_000_000, 0)

	// 1.6 CPUs held on a: the trainer and one worker would fit on b, the
	// other worker nowhere: nothing is taken.
	if _, err := c.allocate(now, AllocateRequest{JobID: "blocker", CPUs: 1.6, MemoryMB: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.allocate(now, req); err == nil {
		t.Fatal("the gang was placed with too little room")
	}
	if n := len(c.st.Nodes["b"].Allocated); n != 0 {
		t.Fatalf("a waiting gang holds %d allocations on b", n)
	}
	c.release(now, "blocker")

	a, err := c.allocate(now, req)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, as := range a.Assignments {
		nodes[as.Node] = true
	}
	if len(a.Assignments) != 3 || len(nodes) != 2 {
		t.Fatalf("gang placed as %+v, want 3 instances over both nodes", a.Assignments)
	}
	keys := map[string]string{}
	for _, name := range c.st.Order {
		for k := range c.st.Nodes[name].Allocated {
			keys[k] = name
		}
	}
	for _, id := range []string{"run", "run/rollout-0", "run/rollout-1"} {
		if keys[id] == "" {
			t.Fatalf("%s not held under its own id: %v", id, keys)
		}
	}
	if again, err := c.allocate(now, req); err != nil || len(again.Assignments) != 3 {
		t.Fatalf("retried request: %+v, %v", again, err)
	}
	sum := c.st.Ledger.Sum(c.params, now.Add(time.Minute))
	if sum.RunningTrainingByConfig["cfg"] != 1 || len(sum.Running) != 3 {
		t.Fatalf("ledger: %d trainings of cfg, running %+v", sum.RunningTrainingByConfig["cfg"], sum.Running)
	}

	// A worker's release frees its share only; the trainer keeps its own.
	c.release(now, "run/rollout-1")
	if _, held := c.held("run/rollout-1"); held {
		t.Fatal("released worker still held")
	}
	if tr, held := c.held("run"); !held || len(tr.Assignments) != 1 || tr.Assignments[0].Role != workspec.RoleTrainer {
		t.Fatalf("trainer after a worker's release: %+v", tr)
	}
	// A cancelled placement gives the whole gang back in one release.
	c.releaseAll(now, Release{JobID: "run", Also: req.Jobs()[1:]})
	for _, name := range c.st.Order {
		if n := len(c.st.Nodes[name].Allocated); n != 0 {
			t.Fatalf("%s still holds %d allocations", name, n)
		}
	}
}
