package scheduler

import (
	"time"
)

// Round is the outcome of scheduling a queue once.
type Round struct {
	Placed     []Placement `json:"placed,omitempty"`
	Waiting    []Placement `json:"waiting,omitempty"`
	Infeasible []Placement `json:"infeasible,omitempty"`
}

// Schedule tries every queued item in order against the nodes as of now.
// Each placed item's allocations count for the items after it. Lower items
// may backfill around a waiting one. The queue and nodes are not changed:
// the caller removes placed items and records their assignments once the
// work is started.
func (s *Scheduler) Schedule(now time.Time, nodes []Node, q *Queue) Round {
	c := s.newCluster(nodes, false)
	var r Round
	var waiting []string
	for _, it := range q.Ordered(now) {
		w := it.Work
		p := s.placeIn(c, nodes, &w, nil)
		switch p.Status {
		case Placed:
			r.Placed = append(r.Placed, p)
		case Waiting:
			p.Behind = append([]string(nil), waiting[:min(len(waiting), 10)]...)
			waiting = append(waiting, w.ID)
			r.Waiting = append(r.Waiting, p)
		default:
			r.Infeasible = append(r.Infeasible, p)
		}
	}
	return r
}

// Running is work that holds a placement.
type Running struct {
	Work
	Assignments []Assignment
}

// Displaced is running work that lost members because their node died or
// drains, and the outcome of placing those members again.
type Displaced struct {
	WorkID string `json:"work_id"`
	// Lost are the assignments on nodes that are gone or not ready.
	Lost []Assignment `json:"lost"`
	// Placement places the lost members (Status Placed), or says why they
	// wait or cannot be placed at all. Its Assignments are the new ones.
	Placement Placement `json:"placement"`
}

// Reschedule re-places members of running work whose node left the node
// list or is no longer ready. Surviving members stay put and count for the
// group strategies. nodes should carry the allocations of all running
// work, including the lost ones (they are ignored on non-ready nodes).
func (s *Scheduler) Reschedule(nodes []Node, running []Running) []Displaced {
	ready := map[string]bool{}
	for _, n := range nodes {
		if n.Ready() {
			ready[n.Name] = true
		}
	}
	c := s.newCluster(nodes, false)
	var out []Displaced
	for _, rw := range running {
		var keep, lost []Assignment
		for _, a := range rw.Assignments {
			if ready[a.Node] {
				keep = append(keep, a)
			} else {
				lost = append(lost, a)
			}
		}
		if len(lost) == 0 {
			continue
		}
		// A STRICT_PACK group must stay on one node: if part of it was
		// lost, the survivors move too.
		keep, moved := splitBrokenPacks(&rw.Work, keep, lost)
		for _, a := range moved {
			c.release(a)
		}
		w := rw.Work
		p := s.placeIn(c, nodes, &w, keep)
		out = append(out, Displaced{WorkID: rw.ID, Lost: append(lost, moved...), Placement: p})
	}
	return out
}

func splitBrokenPacks(w *Work, keep, lost []Assignment) (kept, moved []Assignment) {
	broken := map[string]bool{}
	for _, a := range lost {
		if a.Group != "" && w.Spec.GroupStrategy(a.Group) == "STRICT_PACK" {
			broken[a.Group] = true
		}
	}
	for _, a := range keep {
		if broken[a.Group] {
			moved = append(moved, a)
		} else {
			kept = append(kept, a)
		}
	}
	return kept, moved
}

// release removes one allocation from its node's state (a survivor that
// moves with its broken group).
func (c *cluster) release(a Assignment) {
	for _, n := range c.nodes {
		if n.node.Name != a.Node {
			continue
		}
		for i := range n.allocs {
			x := n.allocs[i]
			if x.WorkID == a.WorkID && x.Role == a.Role && x.Instance == a.Instance {
				last := len(n.allocs) - 1
				n.allocs[i], n.allocs[last] = n.allocs[last], n.allocs[i]
				n.removeLast()
				return
			}
		}
	}
}
