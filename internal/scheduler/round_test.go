package scheduler

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/workspec"
)

// TestRoundDecidesLikePlace: a round decides every item as Place would on
// the nodes with the items placed before it applied, explanations
// included. The round keeps one view of the cluster (and of the empty
// cluster) for all its items and rolls back gangs that fail part-way; this
// says that nothing of a failed gang or of an earlier item's trials is
// left behind, not even rounding (the gangs here ask for tenths of CPUs).
func TestRoundDecidesLikePlace(t *testing.T) {
	p := params.Default()
	now := time.Date(2025, 12, 26, 12, 0, 0, 0, time.UTC)
	nodes := benchFleet()
	nodes[5].Health = Draining
	nodes[6].Allocations = []Allocation{{WorkID: "old", Role: "x", CPUs: 0.7, MemoryMB: 1000, GPUs: []GPUShare{{Index: 1, Share: 1}}}}
	q := benchQueue(p, now)
	for i := 0; i < 16; i++ {
		// Twenty GPU members on twenty of the 25 big nodes, ahead of the
		// rest: ten are placed, the next ones fail part-way once the big
		// GPUs run short.
		actor := inGroup(role("actor", 20, 0.3, 1, 1), "g")
		actor.MinVRAMMB = 60000
		w := grouped(work(fmt.Sprintf("gang%02d", i), workspec.KindSelfPlay, actor), "g", workspec.StrictSpread)
		if err := q.Push(Item{Work: w, Priority: 10, Submitted: now.Add(-48*time.Hour + time.Duration(i)*time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	// And one that no empty cluster holds: 30 members, 25 big nodes. Its
	// trial on the empty cluster places 25 and rolls them back.
	actor := inGroup(role("actor", 30, 0.3, 1, 1), "g")
	actor.MinVRAMMB = 60000
	w := grouped(work("gang-too-big", workspec.KindSelfPlay, actor), "g", workspec.StrictSpread)
	if err := q.Push(Item{Work: w, Priority: 10, Submitted: now.Add(-48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	s := New(p)
	r := s.Schedule(now, nodes, q)
	got := map[string]Placement{}
	for _, ps := range [][]Placement{r.Placed, r.Waiting, r.Infeasible} {
		for _, pl := range ps {
			pl.Behind = nil
			got[pl.WorkID] = pl
		}
	}
	if len(r.Placed) == 0 || len(r.Waiting) == 0 || len(r.Infeasible) != 1 {
		t.Fatalf("%d placed, %d waiting, %d infeasible: the round should have all three", len(r.Placed), len(r.Waiting), len(r.Infeasible))
	}
	failedGangs := 0
	applied := slices.Clone(nodes)
	for _, it := range q.Ordered(now) {
		want := s.Place(applied, it.Work)
		if g, w := mustJSON(t, got[it.ID]), mustJSON(t, want); !bytes.Equal(g, w) {
			t.Fatalf("%s: the round decided\n%s\nPlace decides\n%s", it.ID, g, w)
		}
		if want.Status == Placed {
			apply(applied, want)
		} else if len(want.Units) > 1 {
			failedGangs++
		}
	}
	if failedGangs == 0 {
		t.Error("no gang failed part-way; the test does not exercise rollback")
	}
}
