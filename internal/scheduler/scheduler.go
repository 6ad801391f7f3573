package scheduler

import (
	"fmt"
	"slices"
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

// NodeVerdict is one node's rejection or scores for a unit. Verdicts that
// say the same may share one Rejection: treat it as read-only.
type NodeVerdict struct {
	Node      string     `json:"node"`
	Rejection *Rejection `json:"rejection,omitempty"`
	Scores    []Score    `json:"scores,omitempty"`
	Total     float64    `json:"total,omitempty"`
}

// cluster is the mutable view of one round (or of one Place call), with
// the scratch space and caches its evaluations share.
type cluster struct {
	nodes []*nodeState
	// names is the number of distinct node names; nodeState.nid indexes
	// them (the group counts are kept per name, as the assignments name
	// nodes).
	names int
	nid   map[string]int
	// provs are the providers of the nodes, each once; strs numbers the
	// other strings rejection reasons quote (see reasonKey).
	provs []string
	strs  map[string]int
	// empty is the same nodes with nothing running, built on first need;
	// trials on it always roll back, so one serves a whole round.
	empty *cluster

	// Per-evaluation scratch: each node's verdict before it is written out.
	rejs   []rej
	vals   []float64 // scorers × len(nodes)
	totals []float64
	stages []string  // the scorers' names
	gpuBuf []float64 // assignGPUs' device use
	// undo restores the nodes a failed or trial placement touched, exactly
	// as they were (undoGPU holds their devices' use).
	undo    []undoEntry
	undoGPU []float64
	// reasons caches written rejections: nodes of one shape reject units
	// of one shape with the same words, hundreds of times a round.
	reasons map[reasonKey]*Rejection
	// scoreSlab is what the traces' scores are cut from.
	scoreSlab []Score
}

type undoEntry struct {
	n     *nodeState
	cpu   float64
	mem   int64
	gpuAt int
}

func (s *Scheduler) newCluster(nodes []Node, empty bool) *cluster {
	c := &cluster{nodes: make([]*nodeState, 0, len(nodes)), nid: make(map[string]int, len(nodes))}
	for i := range nodes {
		if empty && !nodes[i].Ready() {
			continue // gone or leaving: cannot make anything feasible
		}
		ns := newNodeState(&nodes[i], &s.params, empty)
		if empty {
			ns.ready = true
		}
		id, ok := c.nid[ns.node.Name]
		if !ok {
			id = c.names
			c.nid[ns.node.Name] = id
			c.names++
		}
		ns.nid = id
		ns.prov = slices.Index(c.provs, ns.node.Provider)
		if ns.prov < 0 {
			ns.prov = len(c.provs)
			c.provs = append(c.provs, ns.node.Provider)
		}
		ns.health = c.intern(string(ns.node.Health))
		c.nodes = append(c.nodes, ns)
	}
	n := len(c.nodes)
	c.rejs = make([]rej, n)
	c.vals = make([]float64, n*len(s.scorers))
	c.totals = make([]float64, n)
	for _, sc := range s.scorers {
		c.stages = append(c.stages, sc.name())
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
	us := units(w, s.params)
	p := s.try(c, w, us, keep, true, true)
	if p.Status == Placed {
		return p
	}
	// Would it fit on the empty cluster? If not, waiting is pointless.
	if c.empty == nil {
		c.empty = s.newCluster(nodes, true)
	}
	// Only the outcome matters unless it fails: then the same trial again,
	// explained.
	if s.try(c.empty, w, us, keep, false, false).Status == Placed {
		return p
	}
	empty := s.try(c.empty, w, us, keep, false, true)
	empty.Status = Infeasible
	empty.Reason = "infeasible even on an empty cluster: " + empty.Reason
	return empty
}

// try runs the pipeline over w's units (us) one by one; all-or-nothing,
// so a failure rolls back what this work placed. Without explain it only
// finds the outcome: no traces and no reason.
func (s *Scheduler) try(c *cluster, w *Work, us []*unit, keep []Assignment, commit, explain bool) Placement {
	ctx := newPlaceCtx(w, &s.params, c)
	for _, a := range keep {
		ctx.addGroup(a.Group, a.Node)
	}
	out := Placement{WorkID: w.ID}
	mark := len(c.undo)
	for _, u := range us {
		if unitKept(keep, u) {
			continue
		}
		trace, best := s.evaluate(ctx, c, u, explain)
		if explain {
			out.Units = append(out.Units, trace)
		}
		if best == nil {
			c.rollback(mark)
			out.Status = Waiting
			out.Assignments = nil
			if explain {
				out.Reason = summarize(u, trace)
			}
			return out
		}
		var picks [][]GPUShare
		if u.gpus != 0 {
			picks = make([][]GPUShare, len(u.members))
			assignGPUs(best, u, false, c.gpuScratch(len(best.gpus)), picks)
		}
		for mi, m := range u.members {
			// Labels go with the allocation even in a trial: anti-affinity
			// reads those of members placed moments ago.
			a := Allocation{
				WorkID: w.ID, Role: m.role.Name, Instance: m.instance, Group: m.group,
				CPUs: m.role.CPUs, MemoryMB: m.role.MemoryMB, Labels: m.labelMap(),
			}
			if picks != nil {
				a.GPUs = picks[mi]
			}
			c.save(best)
			best.add(a)
			out.Assignments = append(out.Assignments, Assignment{Node: best.node.Name, Allocation: a})
			ctx.addGroup(m.group, best.node.Name)
		}
	}
	if commit {
		c.forget(mark)
	} else {
		c.rollback(mark)
	}
	out.Status = Placed
	return out
}

// save notes n's use before an add, for rollback.
func (c *cluster) save(n *nodeState) {
	c.undo = append(c.undo, undoEntry{n: n, cpu: n.usedCPU, mem: n.usedMem, gpuAt: len(c.undoGPU)})
	for _, g := range n.gpus {
		c.undoGPU = append(c.undoGPU, g.used)
	}
}

// rollback undoes the adds since mark, newest first, restoring each node's
// use exactly (subtracting again could leave rounding dust behind).
func (c *cluster) rollback(mark int) {
	for i := len(c.undo) - 1; i >= mark; i-- {
		e := c.undo[i]
		n := e.n
		n.allocs = n.allocs[:len(n.allocs)-1]
		n.usedCPU, n.usedMem = e.cpu, e.mem
		for j := range n.gpus {
			n.gpus[j].used = c.undoGPU[e.gpuAt+j]
		}
		c.undoGPU = c.undoGPU[:e.gpuAt]
	}
	c.undo = c.undo[:mark]
}

// intern is s's number in c.strs.
func (c *cluster) intern(s string) int {
	if c.strs == nil {
		c.strs = map[string]int{}
	}
	id, ok := c.strs[s]
	if !ok {
		id = len(c.strs)
		c.strs[s] = id
	}
	return id
}

// forget drops the undo entries since mark: the adds stay.
func (c *cluster) forget(mark int) {
	if mark < len(c.undo) {
		c.undoGPU = c.undoGPU[:c.undo[mark].gpuAt]
	}
	c.undo = c.undo[:mark]
}

// gpuScratch is a reusable slice of n floats.
func (c *cluster) gpuScratch(n int) []float64 {
	if cap(c.gpuBuf) < n {
		c.gpuBuf = make([]float64, n)
	}
	return c.gpuBuf[:n]
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

// evaluate runs filters and scorers for one unit on every node and picks
// the best. With explain it also writes every node's verdict.
func (s *Scheduler) evaluate(ctx *placeCtx, c *cluster, u *unit, explain bool) (UnitTrace, *nodeState) {
	nn, ns := len(c.nodes), len(s.scorers)
	ctx.here = nil
	if u.group != "" {
		ctx.here = ctx.groupNodes[u.group]
	}
	// Stage by stage across the nodes; a node's first rejection stands.
	rejs := c.rejs
	clear(rejs)
	for _, f := range s.filters {
		f.checkAll(ctx, c.nodes, u, rejs)
	}
	for j, sc := range s.scorers {
		sc.scoreAll(ctx, c.nodes, u, rejs, c.vals[j*nn:(j+1)*nn])
	}
	var best *nodeState
	bestTotal := -1.0
	for i, n := range c.nodes {
		if rejs[i].kind != accepted {
			continue
		}
		total := 0.0
		for j, sc := range s.scorers {
			total += sc.weight * c.vals[j*nn+i]
		}
		c.totals[i] = total
		if total > bestTotal+1e-12 || (total > bestTotal-1e-12 && best != nil && n.node.Name < best.node.Name) {
			best, bestTotal = n, total
		}
	}
	if !explain {
		return UnitTrace{}, best
	}
	trace := UnitTrace{Members: make([]string, len(u.members)), Nodes: make([]NodeVerdict, len(c.nodes))}
	for i, m := range u.members {
		trace.Members[i] = m.name()
	}
	for i, n := range c.nodes {
		v := &trace.Nodes[i]
		v.Node = n.node.Name
		if r := c.rejs[i]; r.kind != accepted {
			v.Rejection = c.rejection(ctx, n, u, r)
			continue
		}
		v.Scores = c.scores(ns)
		for j, stage := range c.stages {
			v.Scores[j] = Score{Stage: stage, Value: c.vals[j*nn+i]}
		}
		v.Total = c.totals[i]
	}
	if best != nil {
		trace.Chosen = best.node.Name
	}
	return trace, best
}

// slab is how many scores one allocation holds.
const slab = 512

// scores is a slice of n scores cut from a slab (capacity n, so an append
// by a reader cannot reach its neighbour).
func (c *cluster) scores(n int) []Score {
	if len(c.scoreSlab) < n {
		c.scoreSlab = make([]Score, max(slab, n))
	}
	out := c.scoreSlab[:n:n]
	c.scoreSlab = c.scoreSlab[n:]
	return out
}

// summarize groups the rejections of a unit nobody took by constraint.
func summarize(u *unit, t UnitTrace) string {
	if len(t.Nodes) == 0 {
		return fmt.Sprintf("%s: no nodes", u.name())
	}
	// Nodes of one shape share a reason, so group by the pair first and
	// join constraint and reason once per group.
	type pair struct{ constraint, reason string }
	type group struct {
		key   string
		nodes []string // the first three
		n     int
	}
	at := map[pair]int{}
	var groups []group
	for _, v := range t.Nodes {
		r := v.Rejection
		if r == nil {
			continue
		}
		i, ok := at[pair{r.Constraint, r.Reason}]
		if !ok {
			i = len(groups)
			at[pair{r.Constraint, r.Reason}] = i
			groups = append(groups, group{key: r.Constraint + ": " + r.Reason})
		}
		g := &groups[i]
		if g.n < 3 {
			g.nodes = append(g.nodes, v.Node)
		}
		g.n++
	}
	slices.SortFunc(groups, func(a, b group) int { return strings.Compare(a.key, b.key) })
	parts := make([]string, len(groups))
	for i, g := range groups {
		nodes := g.nodes
		if g.n > 3 {
			nodes = append(nodes, fmt.Sprintf("+%d more", g.n-3))
		}
		parts[i] = fmt.Sprintf("%s (%s)", g.key, strings.Join(nodes, ", "))
	}
	return fmt.Sprintf("%s fits no node: %s", u.name(), strings.Join(parts, "; "))
}
