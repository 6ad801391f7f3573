package scheduler

import (
	"fmt"
	"slices"
	"time"
)

// Ask is work asking to be placed now, around the nodes it must avoid
// (nodes that lost it before, nodes its siblings use).
type Ask struct {
	Item
	Exclude []string
}

// Cycle decides a batch of asks in one pass over the queue, as one
// scheduling cycle: asks and queued work together in queue order
// (effective priority, then age), each placed on the nodes as the ones
// before it left them. Queued work that is not asking now but fits takes
// its room first, as it will when it asks, so younger or lower work does
// not take it (work a policy rule holds must not be passed in queued: it
// takes nothing). Heads that do not fit are skipped, not waited for: work
// behind them may backfill (Kueue's BestEffortFIFO). It returns one
// placement per ask, in the asks' order; asks' IDs are unique.
//
// Each ask's exclusions hold for it alone, and whether it could ever fit is
// judged without its excluded nodes, as Place on nodes with them down does.
func (s *Scheduler) Cycle(now time.Time, nodes []Node, queued []Item, asks []Ask) []Placement {
	nodes = slices.Clone(nodes) // exclusions mark the copy
	c := s.newCluster(nodes, false)
	q := NewQueue(s.params)
	at := make(map[string]int, len(asks))
	for i, a := range asks {
		at[a.ID] = i
		_ = q.Push(a.Item)
	}
	for _, it := range queued {
		if _, asking := at[it.ID]; !asking {
			_ = q.Push(it)
		}
	}
	out := make([]Placement, len(asks))
	var ahead []string // queued work that took room before the next ask
	left := len(asks)
	for _, it := range q.Ordered(now) {
		if left == 0 {
			break // work behind every ask cannot change their placements
		}
		w := it.Work
		i, asking := at[w.ID]
		if !asking {
			if s.try(c, &w, units(&w, s.params), nil, true, false).Status == Placed {
				ahead = append(ahead, w.ID)
			}
			continue
		}
		restore := c.exclude(asks[i].Exclude)
		p := s.placeIn(c, nodes, &w, nil)
		restore()
		if p.Status == Waiting && len(ahead) > 0 {
			p.Reason += fmt.Sprintf("; queued work ahead of it takes the room first: %v", ahead[:min(len(ahead), 10)])
		}
		out[i] = p
		left--
	}
	return out
}

// exclude marks the named nodes down for one placement and returns what
// undoes it. The empty cluster (the infeasibility check) is rebuilt for
// that placement without them and dropped after it.
func (c *cluster) exclude(names []string) (restore func()) {
	if len(names) == 0 {
		return func() {}
	}
	type saved struct {
		n      *nodeState
		ready  bool
		health int
		h      Health
	}
	var undo []saved
	down := c.intern(string(Down))
	for _, n := range c.nodes {
		if slices.Contains(names, n.node.Name) {
			undo = append(undo, saved{n, n.ready, n.health, n.node.Health})
			n.ready, n.health, n.node.Health = false, down, Down
		}
	}
	empty := c.empty
	c.empty = nil
	return func() {
		for _, u := range undo {
			u.n.ready, u.n.health, u.n.node.Health = u.ready, u.health, u.h
		}
		c.empty = empty
	}
}
