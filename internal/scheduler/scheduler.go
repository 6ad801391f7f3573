package scheduler

import (
	"fmt"
	"sort"
	"strings"

	"github.com/trainyard/trainyard/internal/policy/params"
)

// Scheduler places work. It is stateless between calls: the nodes (with
// their allocations) and the queue are passed in.
type Scheduler struct {
	params  params.Params
	filters []filter
	scorers []weighted
}

// New composes the placement pipeline. Filters run cheapest and most
// selective first; the first rejection is the node's reason. Scorers sum
// with their weights; the highest total wins, ties to the node name.
func New(p params.Params) *Scheduler {
	return &Scheduler{
		params: p,
		filters: []filter{
			healthFilter{},
			nodeAffinityFilter{},
			providerFilter{},
			strategyFilter{},
			antiAffinityFilter{},
			cpuFilter{},
			memoryFilter{},
			gpuFilter{},
		},
		scorers: []weighted{
			{packingScorer{}, 1},
			{tierScorer{}, 1},
			{providerScorer{}, 0.5},
		},
	}
}

// Status of a placement attempt.
type Status string

// Placement outcomes: Infeasible means no node could take the work even if
// the cluster were empty; Waiting means it would fit, but not now.
const (
	Placed     Status = "placed"
	Waiting    Status = "waiting"
	Infeasible Status = "infeasible"
)

// Placement is the outcome for one work with its explanation.
type Placement struct {
	WorkID      string       `json:"work_id"`
	Status      Status       `json:"status"`
	Assignments []Assignment `json:"assignments,omitempty"`
	// Units explain each placement decision in order; for a failed
	// placement the last one is the unit nothing could take.
	Units []UnitTrace `json:"units"`
	// Reason summarises why the work waits or is infeasible.
	Reason string `json:"reason,omitempty"`
	// Behind lists queued work ahead of this one that also waits (up to
	// ten), filled by Schedule.
	Behind []string `json:"behind,omitempty"`
}

// UnitTrace explains one decision: which members, the chosen node, and
// every node's verdict.
type UnitTrace struct {
	Members []string      `json:"members"`
	Chosen  string        `json:"chosen,omitempty"`
	Nodes   []NodeVerdict `json:"nodes"`
}

// NodeVerdict is one node's rejection or scores for a unit.
type NodeVerdict struct {
	Node      string     `json:"node"`
	Rejection *Rejection `json:"rejection,omitempty"`
	Scores    []Score    `json:"scores,omitempty"`
	Total     float64    `json:"total,omitempty"`
}

// cluster is the mutable view of one round.
type cluster struct {
	nodes []*nodeState
	// empty is the same nodes with nothing running, built on first need;
	// trials on it always roll back, so one serves a whole round.
	empty *cluster
}

func (s *Scheduler) newCluster(nodes []Node, empty bool) *cluster {
	c := &cluster{nodes: make([]*nodeState, 0, len(nodes))}
	for i := range nodes {
		if empty && !nodes[i].Ready() {
			continue // gone or leaving: cannot make anything feasible
		}
		ns := newNodeState(&nodes[i], s.params, empty)
		if empty {
			ns.ready = true
		}
		c.nodes = append(c.nodes, ns)
	}
	return c
}

// Place places one work on the nodes as they are (allocations included).
// It does not change nodes; apply the assignments to them when the work
// starts.
func (s *Scheduler) Place(nodes []Node, w Work) Placement {
	return s.placeIn(s.newCluster(nodes, false), nodes, &w, nil)
}

// placeIn places w on c, committing on success. keep are allocations of w
// that survive (re-placement); strategies count them.
func (s *Scheduler) placeIn(c *cluster, nodes []Node, w *Work, keep []Assignment) Placement {
	p := s.try(c, w, keep, true)
	if p.Status == Placed {
		return p
	}
	// Would it fit on the empty cluster? If not, waiting is pointless.
	if c.empty == nil {
		c.empty = s.newCluster(nodes, true)
	}
	empty := s.try(c.empty, w, keep, false)
	if empty.Status != Placed {
		empty.Status = Infeasible
		empty.Reason = "infeasible even on an empty cluster: " + empty.Reason
		return empty
	}
	return p
}

// try runs the pipeline unit by unit; all-or-nothing, so a failure rolls
// back what this work placed.
func (s *Scheduler) try(c *cluster, w *Work, keep []Assignment, commit bool) Placement {
	ctx := &placeCtx{work: w, params: s.params, groupNodes: map[string]map[string]int{}, gpuPick: map[string][][]GPUShare{}}
	for _, a := range keep {
		ctx.addGroup(a.Group, a.Node)
	}
	out := Placement{WorkID: w.ID}
	var placed []*nodeState
	rollback := func() {
		for i := len(placed) - 1; i >= 0; i-- {
			placed[i].removeLast()
		}
	}
	for _, u := range units(w, s.params) {
		if unitKept(keep, u) {
			continue
		}
		{
			trace, best := s.evaluate(ctx, c, u)
			out.Units = append(out.Units, trace)
			if best == nil {
				rollback()
				out.Status = Waiting
				out.Assignments = nil
				out.Reason = summarize(u, trace)
				return out
			}
			picks := ctx.gpuPick[best.node.Name]
			for mi, m := range u.members {
				a := Assignment{Node: best.node.Name, Allocation: Allocation{
					WorkID: w.ID, Role: m.role.Name, Instance: m.instance, Group: m.group,
					CPUs: m.role.CPUs, MemoryMB: m.role.MemoryMB, Labels: m.labels,
				}}
				if picks != nil {
					a.GPUs = picks[mi]
				}
				best.add(a.Allocation)
				placed = append(placed, best)
				out.Assignments = append(out.Assignments, a)
				ctx.addGroup(m.group, best.node.Name)
			}
		}
	}
	if !commit {
		rollback()
	}
	out.Status = Placed
	return out
}

// unitKept: a unit whose members all survive needs no placement. (A
// STRICT_PACK group that lost any member is re-placed whole.)
func unitKept(keep []Assignment, u *unit) bool {
	if len(keep) == 0 {
		return false
	}
	for _, m := range u.members {
		found := false
		for _, a := range keep {
			if a.Role == m.role.Name && a.Instance == m.instance {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (c *placeCtx) addGroup(group, node string) {
	if group == "" {
		return
	}
	if c.groupNodes[group] == nil {
		c.groupNodes[group] = map[string]int{}
	}
	c.groupNodes[group][node]++
}

// evaluate runs filters and scorers for one unit on every node.
func (s *Scheduler) evaluate(ctx *placeCtx, c *cluster, u *unit) (UnitTrace, *nodeState) {
	trace := UnitTrace{Nodes: make([]NodeVerdict, 0, len(c.nodes))}
	for _, m := range u.members {
		trace.Members = append(trace.Members, m.name())
	}
	clear(ctx.gpuPick)
	var best *nodeState
	bestTotal := -1.0
	for _, n := range c.nodes {
		v := NodeVerdict{Node: n.node.Name}
		for _, f := range s.filters {
			if r := f.check(ctx, n, u); r != nil {
				v.Rejection = r
				break
			}
		}
		if v.Rejection == nil {
			v.Scores = make([]Score, len(s.scorers))
			for i, sc := range s.scorers {
				val := sc.score(ctx, n, u)
				v.Scores[i] = Score{Stage: sc.name(), Value: val}
				v.Total += sc.weight * val
			}
			if v.Total > bestTotal+1e-12 || (v.Total > bestTotal-1e-12 && best != nil && n.node.Name < best.node.Name) {
				best, bestTotal = n, v.Total
			}
		}
		trace.Nodes = append(trace.Nodes, v)
	}
	if best != nil {
		trace.Chosen = best.node.Name
	}
	return trace, best
}

// summarize groups the rejections of a unit nobody took by constraint.
func summarize(u *unit, t UnitTrace) string {
	if len(t.Nodes) == 0 {
		return fmt.Sprintf("%s: no nodes", u.name())
	}
	by := map[string][]string{}
	for _, v := range t.Nodes {
		if v.Rejection != nil {
			key := v.Rejection.Constraint + ": " + v.Rejection.Reason
			by[key] = append(by[key], v.Node)
		}
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		nodes := by[k]
		if len(nodes) > 3 {
			nodes = append(nodes[:3:3], fmt.Sprintf("+%d more", len(by[k])-3))
		}
		parts[i] = fmt.Sprintf("%s (%s)", k, strings.Join(nodes, ", "))
	}
	return fmt.Sprintf("%s fits no node: %s", u.name(), strings.Join(parts, "; "))
}
