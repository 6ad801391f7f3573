package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/policy/params"
)

func TestCycle(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	item := func(w Work, prio int, age time.Duration) Item {
		return Item{Work: w, Priority: prio, Submitted: now.Add(-age)}
	}
	two := func() []Node { return []Node{node("a", "lab", 4, 8), node("b", "lab", 4, 8)} }
	small := func(id string) Work { return work(id, "job", role("main", 1, 3, 1, 0)) }
	cases := []struct {
		name   string
		nodes  []Node
		queued []Item
		asks   []Ask
		want   []string // per ask: its nodes, or its status and a word of its reason
	}{
		{
			name:  "each ask's placement counts for the next",
			nodes: two(),
			asks:  []Ask{{Item: item(small("j1"), 0, 2*time.Second)}, {Item: item(small("j2"), 0, time.Second)}, {Item: item(small("j3"), 0, 0)}},
			want:  []string{"a", "b", "waiting needs 3 CPUs"},
		},
		{
			name:  "queue order, not the asks' order, decides who goes first",
			nodes: two()[:1],
			asks:  []Ask{{Item: item(small("low"), 0, time.Hour)}, {Item: item(small("high"), 5, 0)}},
			want:  []string{"waiting needs 3 CPUs", "a"},
		},
		{
			name:   "queued work ahead takes its room first",
			nodes:  two(),
			queued: []Item{item(small("old"), 0, time.Hour)},
			asks:   []Ask{{Item: item(small("j1"), 0, 0)}, {Item: item(small("j2"), 0, 0)}},
			want:   []string{"b", "waiting queued work ahead of it takes the room first: [old]"},
		},
		{
			name:   "queued work behind takes nothing",
			nodes:  two()[:1],
			queued: []Item{item(small("young"), 0, 0)},
			asks:   []Ask{{Item: item(small("j1"), 0, time.Minute)}},
			want:   []string{"a"},
		},
		{
			name:  "exclusions hold for their ask alone",
			nodes: two(),
			asks:  []Ask{{Item: item(small("j1"), 0, time.Minute), Exclude: []string{"a"}}, {Item: item(small("j2"), 0, 0)}},
			want:  []string{"b", "a"},
		},
		{
			name:  "an ask excluded from every node that fits is infeasible; the next is not",
			nodes: two()[:1],
			asks:  []Ask{{Item: item(small("j1"), 0, time.Minute), Exclude: []string{"a"}}, {Item: item(small("j2"), 0, 0)}},
			want:  []string{"infeasible no nodes", "a"},
		},
		{
			name:  "a head that does not fit is skipped: work behind it backfills",
			nodes: two()[:1],
			asks:  []Ask{{Item: item(work("big", "job", role("main", 1, 8, 1, 0)), 5, 0)}, {Item: item(small("j1"), 0, 0)}},
			want:  []string{"infeasible needs 8 CPUs", "a"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := tc.nodes
			before := fmt.Sprint(nodes)
			got := New(params.Default()).Cycle(now, nodes, tc.queued, tc.asks)
			if fmt.Sprint(nodes) != before {
				t.Fatalf("Cycle changed its nodes")
			}
			for i, p := range got {
				desc := strings.Join(nodesOf(p), ",")
				if p.Status != Placed {
					desc = string(p.Status) + " " + p.Reason
				}
				words := strings.SplitN(tc.want[i], " ", 2)
				if p.Status == Placed && desc != tc.want[i] || p.Status != Placed && (words[0] != string(p.Status) || !strings.Contains(p.Reason, words[1])) {
					t.Errorf("ask %s: got %q, want %q", tc.asks[i].ID, desc, tc.want[i])
				}
			}
		})
	}
}

// TestCycleMatchesPlace: with no queue and no exclusions, a cycle of one
// ask places as Place does, and a cycle of many as Schedule does.
func TestCycleMatchesPlace(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	nodes := []Node{node("a", "lab", 16, 64, 24000, 24000), node("b", "lab", 8, 32, 80000), node("c", "cloud", 32, 128)}
	s := New(params.Default())
	q := NewQueue(params.Default())
	var asks []Ask
	for i := range 12 {
		w := work(fmt.Sprintf("w%02d", i), "job", role("main", 1+i%3, float64(1+i%4), 2, float64(i%2)))
		it := Item{Work: w, Priority: i % 3, Submitted: now.Add(-time.Duration(i) * time.Second)}
		asks = append(asks, Ask{Item: it})
		_ = q.Push(it)
		one := s.Cycle(now, nodes, nil, []Ask{{Item: it}})[0]
		if want := s.Place(nodes, w); fmt.Sprint(nodesOf(one), one.Status) != fmt.Sprint(nodesOf(want), want.Status) {
			t.Errorf("%s: cycle %v %s, Place %v %s", w.ID, nodesOf(one), one.Status, nodesOf(want), want.Status)
		}
	}
	got := s.Cycle(now, nodes, nil, asks)
	r := s.Schedule(now, nodes, q)
	for _, p := range slices.Concat(r.Placed, r.Waiting, r.Infeasible) {
		i := slices.IndexFunc(asks, func(a Ask) bool { return a.ID == p.WorkID })
		if fmt.Sprint(nodesOf(got[i]), got[i].Status) != fmt.Sprint(nodesOf(p), p.Status) {
			t.Errorf("%s: cycle %v %s, Schedule %v %s", p.WorkID, nodesOf(got[i]), got[i].Status, nodesOf(p), p.Status)
		}
	}
}
