package cluster

import (
	"slices"
	"testing"
	"time"
)

// TestOrder: the cluster's queue order first, with its effective
// priorities; work it has not seen yet after, longest waiting first; every
// entry numbered and told what holds the nodes.
func TestOrder(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	at := func(s int) *time.Time { v := t0.Add(time.Duration(s) * time.Second); return &v }
	st := Status{
		Nodes: []NodeStatus{{Name: "a", Jobs: []string{"run-1"}}, {Name: "b", Jobs: []string{"job-2"}}},
		Queue: []QueueItem{{WorkID: "job-hi", EffectivePriority: 9}, {WorkID: "run-lo", EffectivePriority: 1}},
	}
	got := st.Order([]QueueEntry{
		{ID: "unseen-late", WaitingSince: at(30)},
		{ID: "run-lo", WaitingSince: at(0)},
		{ID: "unseen-early", WaitingSince: at(10)},
		{ID: "job-hi", WaitingSince: at(20)},
	})
	var ids []string
	for i, q := range got {
		ids = append(ids, q.ID)
		if q.Position != i+1 || !slices.Equal(q.Running, []string{"run-1", "job-2"}) {
			t.Errorf("%s: position %d, behind %v", q.ID, q.Position, q.Running)
		}
	}
	if want := []string{"job-hi", "run-lo", "unseen-early", "unseen-late"}; !slices.Equal(ids, want) {
		t.Fatalf("order %v, want %v", ids, want)
	}
	if got[0].EffectivePriority != 9 || got[1].EffectivePriority != 1 || got[2].EffectivePriority != 0 {
		t.Errorf("effective priorities: %+v", got)
	}
	if w := (Status{}).Order(nil); w == nil || len(w) != 0 {
		t.Errorf("nothing waiting: %#v, want an empty list (JSON [])", w)
	}
}
