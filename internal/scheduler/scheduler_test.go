package scheduler

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/workspec"
)

func TestStrategies(t *testing.T) {
	two := func() []Node { return []Node{node("a", "lab", 16, 64), node("b", "lab", 16, 64)} }
	tests := []struct {
		name     string
		strat    workspec.Strategy
		count    int
		cpus     float64
		status   Status
		distinct int // nodes used when placed
	}{
		{"PACK keeps the group on one node", workspec.Pack, 3, 2, Placed, 1},
		{"SPREAD uses both nodes", workspec.Spread, 2, 2, Placed, 2},
		{"STRICT_PACK on one node", workspec.StrictPack, 3, 4, Placed, 1},
		{"STRICT_SPREAD one per node", workspec.StrictSpread, 2, 2, Placed, 2},
		{"PACK overflows when it must", workspec.Pack, 3, 6, Placed, 2},
		{"STRICT_PACK larger than any node", workspec.StrictPack, 3, 6, Infeasible, 0},
		{"STRICT_SPREAD with more members than nodes", workspec.StrictSpread, 3, 1, Infeasible, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(params.Default())
			w := grouped(work("w", workspec.KindSelfPlay, inGroup(role("player", tt.count, tt.cpus, 1, 0), "g")), "g", tt.strat)
			p := s.Place(two(), w)
			mustStatus(t, p, tt.status)
			if tt.status == Placed {
				if got := distinct(nodesOf(p)); got != tt.distinct {
					t.Errorf("used %d nodes %v, want %d", got, nodesOf(p), tt.distinct)
				}
			} else if len(p.Assignments) != 0 {
				// All-or-nothing: a group that cannot be placed whole keeps no member.
				t.Errorf("failed group kept assignments %+v", p.Assignments)
			}
		})
	}
}

func TestBinPackingWithoutGroup(t *testing.T) {
	nodes := []Node{node("a", "lab", 16, 64), node("b", "lab", 16, 64)}
	nodes[1].Allocations = []Allocation{{WorkID: "old", Role: "x", CPUs: 8, MemoryMB: 8000}}
	p := New(params.Default()).Place(nodes, work("w", workspec.KindSelfPlay, role("player", 1, 2, 1, 0)))
	mustStatus(t, p, Placed)
	if got := nodesOf(p); !slices.Equal(got, []string{"b"}) {
		t.Errorf("placed on %v, want the fuller node b", got)
	}
}

func TestStrictGangFailureLeavesNothingPlaced(t *testing.T) {
	nodes := []Node{node("a", "lab", 10, 100), node("b", "lab", 10, 100), node("c", "lab", 10, 100)}
	nodes[2].Allocations = []Allocation{{WorkID: "old", Role: "x", CPUs: 8, MemoryMB: 1000}}
	q := NewQueue(params.Default())
	now := time.Date(2025, 12, 26, 12, 0, 0, 0, time.UTC)
	// gang needs three nodes with 5 CPUs free; c has 1 left, so it waits.
	gang := grouped(work("gang", workspec.KindSelfPlay, inGroup(role("p", 3, 5, 1, 0), "g")), "g", workspec.StrictSpread)
	// big needs 9 CPUs on each of a and b: only possible if the gang's
	// first members were rolled back.
	big := work("big", workspec.KindSelfPlay, role("q", 2, 9, 1, 0))
	if err := q.Push(Item{Work: gang, Priority: 10, Submitted: now}); err != nil {
		t.Fatal(err)
	}
	if err := q.Push(Item{Work: big, Priority: 0, Submitted: now}); err != nil {
		t.Fatal(err)
	}
	r := New(params.Default()).Schedule(now, nodes, q)
	if len(r.Waiting) != 1 || r.Waiting[0].WorkID != "gang" {
		t.Fatalf("waiting = %+v, want the gang", r.Waiting)
	}
	mustStatus(t, r.Waiting[0], Waiting)
	// Nothing of the gang stays placed: no assignments, and the caller's
	// nodes are untouched (a and b stay empty, c keeps only "old").
	if len(r.Waiting[0].Assignments) != 0 {
		t.Errorf("waiting gang kept assignments %+v", r.Waiting[0].Assignments)
	}
	if len(nodes[0].Allocations)+len(nodes[1].Allocations) != 0 || len(nodes[2].Allocations) != 1 {
		t.Errorf("Schedule changed the nodes: %+v", nodes)
	}
	if len(r.Placed) != 1 || r.Placed[0].WorkID != "big" {
		t.Fatalf("placed = %+v, want big on the nodes the gang released", r.Placed)
	}
	if got := nodesOf(r.Placed[0]); distinct(got) != 2 || slices.Contains(got, "c") {
		t.Errorf("big placed on %v, want a and b", got)
	}
	if !strings.Contains(r.Waiting[0].Reason, "cpu") {
		t.Errorf("waiting reason %q does not name the cpu constraint", r.Waiting[0].Reason)
	}
}

func TestFractionalGPUs(t *testing.T) {
	tests := []struct {
		name     string
		gpus     float64
		count    int
		usedGPU0 float64
		status   Status
	}{
		{"four quarters share one GPU", 0.25, 4, 0, Placed},
		{"five quarters never fit one GPU", 0.25, 5, 0, Infeasible},
		{"three quarters wait for a half-used GPU", 0.25, 3, 0.5, Waiting},
		{"two quarters fit beside a half", 0.25, 2, 0.5, Placed},
		{"whole GPU waits behind a fraction", 1, 1, 0.25, Waiting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []Node{node("g", "lab", 64, 256, 48000)}
			if tt.usedGPU0 > 0 {
				nodes[0].Allocations = []Allocation{{WorkID: "old", Role: "x", GPUs: []GPUShare{{Index: 0, Share: tt.usedGPU0}}}}
			}
			p := New(params.Default()).Place(nodes, work("w", workspec.KindEvaluation, role("actor", tt.count, 1, 1, tt.gpus)))
			mustStatus(t, p, tt.status)
			total := 0.0
			for _, a := range p.Assignments {
				for _, g := range a.GPUs {
					total += g.Share
				}
			}
			if tt.status == Placed && total != tt.gpus*float64(tt.count) {
				t.Errorf("assigned %g GPU, want %g", total, tt.gpus*float64(tt.count))
			}
		})
	}
}

func TestColocationGroupSharesANode(t *testing.T) {
	nodes := []Node{node("cpu", "lab", 64, 256), node("gpu", "lab", 16, 128, 81559)}
	w := grouped(work("train", workspec.KindTraining,
		inGroup(role(workspec.RoleTrainer, 1, 4, 32, 1), "training_group"),
		inGroup(role(workspec.RoleTrajectoryPool, 1, 1, 8, 0), "training_group"),
		inGroup(role(workspec.RoleWeightSync, 1, 1, 2, 0), "training_group"),
		role(workspec.RoleDataLoader, 1, 1, 4, 0),
	), "training_group", workspec.StrictPack)
	p := New(params.Default()).Place(nodes, w)
	mustStatus(t, p, Placed)
	for _, a := range p.Assignments {
		if a.Group == "training_group" && a.Node != "gpu" {
			t.Errorf("%s on %s, want the group together on the GPU node", a.Role, a.Node)
		}
	}
	if len(p.Units) != 2 || len(p.Units[0].Members) != 3 {
		t.Errorf("units = %+v, want the group as one unit then the loader", p.Units)
	}
}

func TestAntiAffinity(t *testing.T) {
	self := workspec.Selector{Key: "role", Values: []string{"rollout_worker"}}
	tests := []struct {
		name    string
		count   int
		existed bool // another work's rollout worker already on node a
		status  Status
	}{
		{"one per node", 3, false, Placed},
		{"more members than nodes is infeasible", 4, false, Infeasible},
		{"an existing worker blocks its node, so it waits", 3, true, Waiting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []Node{node("a", "lab", 32, 64), node("b", "lab", 32, 64), node("c", "lab", 32, 64)}
			if tt.existed {
				nodes[0].Allocations = []Allocation{{WorkID: "other", Role: "rollout_worker", CPUs: 1, Labels: map[string]string{"role": "rollout_worker"}}}
			}
			r := role("rollout_worker", tt.count, 2, 2, 0)
			r.AntiAffinity = []workspec.Selector{self}
			p := New(params.Default()).Place(nodes, work("w", workspec.KindRollout, r))
			mustStatus(t, p, tt.status)
			if tt.status == Placed && distinct(nodesOf(p)) != tt.count {
				t.Errorf("placed on %v, want %d distinct nodes", nodesOf(p), tt.count)
			}
		})
	}
	t.Run("node label anti-affinity", func(t *testing.T) {
		nodes := []Node{node("a", "lab", 32, 64), node("b", "lab", 8, 16)}
		nodes[0].Labels = map[string]string{"inference": "llama"}
		r := role("rollout_worker", 1, 1, 1, 0)
		r.NodeAntiAffinity = []workspec.Selector{{Key: "inference"}}
		p := New(params.Default()).Place(nodes, work("w", workspec.KindRollout, r))
		mustStatus(t, p, Placed)
		if nodesOf(p)[0] != "b" {
			t.Errorf("placed on %v, want b", nodesOf(p))
		}
		if v := p.Units[0].Nodes[0]; v.Rejection == nil || v.Rejection.Constraint != "node_anti_affinity" {
			t.Errorf("node a verdict %+v, want a node_anti_affinity rejection", v)
		}
	})
}

func TestReservedGPUsNeverUsed(t *testing.T) {
	p := paramsWith(t, func(p *params.Params) {
		p.GPUPreservation.Enabled = true
		p.GPUPreservation.ReservedPerNode = 1
		p.GPUPreservation.Reserved = []string{"n2:1"}
	})
	tests := []struct {
		name   string
		count  int
		gpus   float64
		status Status
	}{
		{"one GPU left free per node", 2, 1, Placed},
		{"a third GPU only exists reserved", 3, 1, Infeasible},
		{"fractions stay off reserved GPUs", 4, 0.5, Placed},
		{"and cannot exceed the free ones", 5, 0.5, Infeasible},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []Node{node("n1", "lab", 64, 256, 48000, 48000), node("n2", "lab", 64, 256, 48000, 48000, 48000)}
			pl := New(p).Place(nodes, work("w", workspec.KindEvaluation, role("e", tt.count, 1, 1, tt.gpus)))
			mustStatus(t, pl, tt.status)
			for _, a := range pl.Assignments {
				for _, g := range a.GPUs {
					if g.Index == 0 || (a.Node == "n2" && g.Index == 1) {
						t.Errorf("%s#%d got reserved GPU %s:%d", a.Role, a.Instance, a.Node, g.Index)
					}
				}
			}
			if tt.status == Infeasible && !strings.Contains(pl.Reason, "reserved for inference") {
				t.Errorf("reason %q does not mention the reservation", pl.Reason)
			}
		})
	}
}

// TestInferenceGPUsReserved: GPUs serving inference endpoints are kept
// free while GPU preservation is on, and usable when it is off.
func TestInferenceGPUsReserved(t *testing.T) {
	for _, tc := range []struct {
		name     string
		preserve bool
		count    int
		status   Status
	}{
		{"preservation on: the endpoint's GPU stays free", true, 1, Placed},
		{"preservation on: no second GPU to give", true, 2, Infeasible},
		{"preservation off: both GPUs", false, 2, Placed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := paramsWith(t, func(p *params.Params) { p.GPUPreservation.Enabled = tc.preserve })
			n := node("g5", "aws", 16, 64, 24000, 24000)
			n.InferenceGPUs = []int{0}
			pl := New(p).Place([]Node{n}, work("w", workspec.KindEvaluation, role("e", tc.count, 1, 1, 1)))
			mustStatus(t, pl, tc.status)
			for _, a := range pl.Assignments {
				for _, g := range a.GPUs {
					if tc.preserve && g.Index == 0 {
						t.Errorf("%s#%d got the inference GPU", a.Role, a.Instance)
					}
				}
			}
		})
	}
}

func TestStarvationBoostOrdering(t *testing.T) {
	now := time.Date(2025, 12, 26, 12, 0, 0, 0, time.UTC)
	q := NewQueue(params.Default())
	items := []Item{
		{Work: Work{ID: "fresh-high"}, Priority: 10, Submitted: now.Add(-time.Hour)},
		{Work: Work{ID: "starved-low"}, Priority: 0, Submitted: now.Add(-5 * time.Hour)},
		{Work: Work{ID: "old-low"}, Priority: 0, Submitted: now.Add(-3 * time.Hour)},
		{Work: Work{ID: "new-low"}, Priority: 0, Submitted: now.Add(-time.Minute)},
		{Work: Work{ID: "just-starved"}, Priority: 0, Submitted: now.Add(-4 * time.Hour)},
	}
	for _, it := range items {
		if err := q.Push(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Push(items[0]); err == nil {
		t.Error("duplicate push accepted")
	}
	tests := []struct {
		at   time.Time
		want []string
	}{
		{now.Add(-2 * time.Hour), []string{"fresh-high", "starved-low", "just-starved", "old-low", "new-low"}},
		{now, []string{"starved-low", "just-starved", "fresh-high", "old-low", "new-low"}},
		{now.Add(time.Hour), []string{"starved-low", "just-starved", "old-low", "fresh-high", "new-low"}},
	}
	for _, tt := range tests {
		var got []string
		for _, it := range q.Ordered(tt.at) {
			got = append(got, it.ID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("order at %s = %v, want %v", tt.at.Format(time.Kitchen), got, tt.want)
		}
	}
}

func TestInfeasibleVersusWaiting(t *testing.T) {
	small := node("vast-3060", "vast", 8, 64, 12288)
	big := node("runpod-a100", "runpod", 32, 256, 81920)
	hex := func(id string) Work {
		w := work(id, workspec.KindSelfPlay, role("player", 1, 2, 8, 1))
		w.Spec.Config = "hexagonal_2p"
		return w
	}
	t.Run("board too big for every GPU", func(t *testing.T) {
		p := New(params.Default()).Place([]Node{small}, hex("h"))
		mustStatus(t, p, Infeasible)
		v := p.Units[0].Nodes[0].Rejection
		if v == nil || v.Constraint != "gpu" || !v.Permanent || !strings.Contains(v.Reason, ">= 32000 MB VRAM") {
			t.Errorf("rejection %+v, want a permanent gpu rejection naming the VRAM floor", v)
		}
	})
	t.Run("fits, but the big GPU is busy", func(t *testing.T) {
		busy := big
		busy.Allocations = []Allocation{{WorkID: "train", Role: "trainer", GPUs: []GPUShare{{Index: 0, Share: 1}}}}
		p := New(params.Default()).Place([]Node{small, busy}, hex("h"))
		mustStatus(t, p, Waiting)
		if !strings.Contains(p.Reason, "eligible GPUs are busy (runpod-a100)") {
			t.Errorf("reason %q", p.Reason)
		}
	})
	t.Run("the only big node leaves", func(t *testing.T) {
		gone := big
		gone.Health = Down
		p := New(params.Default()).Place([]Node{small, gone}, hex("h"))
		mustStatus(t, p, Infeasible)
	})
	t.Run("queue says what it waits behind", func(t *testing.T) {
		busy := big
		busy.Allocations = []Allocation{{WorkID: "train", Role: "trainer", GPUs: []GPUShare{{Index: 0, Share: 1}}}}
		q := NewQueue(params.Default())
		now := time.Unix(0, 0)
		_ = q.Push(Item{Work: hex("first"), Submitted: now})
		_ = q.Push(Item{Work: hex("second"), Submitted: now.Add(time.Second)})
		r := New(params.Default()).Schedule(now.Add(time.Minute), []Node{small, busy}, q)
		if len(r.Waiting) != 2 || !slices.Equal(r.Waiting[1].Behind, []string{"first"}) {
			t.Errorf("waiting = %+v, want second behind first", r.Waiting)
		}
	})
}

func TestEveryNodeExplained(t *testing.T) {
	nodes := []Node{node("a", "lab", 4, 8), node("b", "lab", 16, 64), node("c", "lab", 16, 64)}
	nodes[2].Health = Draining
	p := New(params.Default()).Place(nodes, work("w", workspec.KindSelfPlay, role("p", 1, 6, 4, 0)))
	mustStatus(t, p, Placed)
	u := p.Units[0]
	if u.Chosen != "b" || len(u.Nodes) != 3 {
		t.Fatalf("trace %+v", u)
	}
	want := map[string]string{"a": "cpu", "c": "health"}
	for _, v := range u.Nodes {
		switch {
		case v.Node == "b":
			if v.Rejection != nil || len(v.Scores) != 3 {
				t.Errorf("chosen node verdict %+v, want three scores", v)
			}
		case v.Rejection == nil || v.Rejection.Constraint != want[v.Node]:
			t.Errorf("node %s verdict %+v, want a %s rejection", v.Node, v, want[v.Node])
		}
	}
}

func TestProviders(t *testing.T) {
	nodes := []Node{node("vast-1", "vast", 32, 128, 81920), node("runpod-1", "runpod", 32, 128, 81920)}
	nodes[0].Ephemeral = true
	tests := []struct {
		kind string
		want string
	}{
		{workspec.KindTraining, "runpod-1"},
		{workspec.KindSelfPlay, "vast-1"},
	}
	for _, tt := range tests {
		p := New(params.Default()).Place(nodes, work("w", tt.kind, role("r", 1, 2, 8, 1)))
		mustStatus(t, p, Placed)
		if got := nodesOf(p)[0]; got != tt.want {
			t.Errorf("%s placed on %s, want %s", tt.kind, got, tt.want)
		}
	}
	p := New(params.Default()).Place(nodes[:1], work("w", workspec.KindTraining, role("r", 1, 2, 8, 1)))
	mustStatus(t, p, Infeasible)
}

func TestRescheduleAfterNodeDies(t *testing.T) {
	nodes := []Node{node("a", "lab", 16, 64, 48000), node("b", "lab", 16, 64, 48000), node("c", "lab", 16, 64, 48000)}
	w := grouped(work("w", workspec.KindSelfPlay,
		inGroup(role("actor", 2, 4, 4, 0), "spread"),
		inGroup(role("learner", 1, 2, 4, 1), "pack"),
		inGroup(role("buffer", 1, 2, 4, 0), "pack"),
	), "spread", workspec.StrictSpread)
	w.Spec.Groups = append(w.Spec.Groups, workspec.Group{Name: "pack", Strategy: workspec.StrictPack})
	s := New(params.Default())
	p := s.Place(nodes, w)
	mustStatus(t, p, Placed)
	apply(nodes, p)
	// Kill the node holding the packed pair.
	var dead string
	for _, a := range p.Assignments {
		if a.Role == "learner" {
			dead = a.Node
		}
	}
	for i := range nodes {
		if nodes[i].Name == dead {
			nodes[i].Health = Down
		}
	}
	ds := s.Reschedule(nodes, []Running{{Work: w, Assignments: p.Assignments}})
	if len(ds) != 1 {
		t.Fatalf("displaced = %+v, want one work", ds)
	}
	d := ds[0]
	mustStatus(t, d.Placement, Placed)
	moved := map[string]string{}
	for _, a := range d.Placement.Assignments {
		if a.Node == dead {
			t.Errorf("%s re-placed on the dead node", a.Role)
		}
		moved[a.Role+"#"+string(rune('0'+a.Instance))] = a.Node
	}
	if moved["learner#0"] == "" || moved["learner#0"] != moved["buffer#0"] {
		t.Errorf("re-placed %v, want learner and buffer together", moved)
	}
	// Actors that survived stay; the STRICT_SPREAD group stays spread.
	var actorNodes []string
	for _, a := range p.Assignments {
		if a.Role == "actor" && a.Node != dead {
			actorNodes = append(actorNodes, a.Node)
		}
	}
	for _, a := range d.Placement.Assignments {
		if a.Role == "actor" {
			actorNodes = append(actorNodes, a.Node)
		}
	}
	if len(actorNodes) != 2 || distinct(actorNodes) != 2 {
		t.Errorf("actors on %v, want two distinct live nodes", actorNodes)
	}
	// With two of three nodes gone the spread group cannot be whole.
	for i := range nodes {
		nodes[i].Health = Down
	}
	nodes[0].Health = Ready
	ds = s.Reschedule(nodes, []Running{{Work: w, Assignments: p.Assignments}})
	if len(ds) != 1 || ds[0].Placement.Status != Infeasible {
		t.Errorf("displaced = %+v, want infeasible", ds)
	}
}
