package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Node groups. A cluster's leases are held by node-group workflows of up
// to leaseGroupSize nodes each, not by the cluster's own execution. Each
// lease heartbeat is a write of the execution holding the lease, under
// its lock, and each pending lease a coroutine the SDK resumes on every
// workflow task: at 1,000 nodes in the cluster's execution they were the
// bulk of its workflow tasks' time, its updates (placements) queued behind
// them, and every continue-as-new began with 1,000 lease activities (4,000
// history events). A group tells the cluster only of a lease that ended
// for a reason other than its term (lost, refused, failed, unsupported);
// the cluster still decides what that means for the node, once, in its
// own history.

// LeaseGroupName is the node-group workflow's type.
const LeaseGroupName = "ClusterLeaseGroup"

const (
	// SignalLeaseHold carries []LeaseHold to a node group.
	SignalLeaseHold = "lease-hold"
	// SignalLeaseEnded carries a LeaseEnd from a node group to its cluster.
	SignalLeaseEnded = "lease-ended"
)

// leaseGroupSize is how many nodes' leases one group holds: their beats,
// capped at leaseBeatsPerSecond for the cluster, stay a few a second per
// execution, far below Temporal's 2,000 pending activities.
const leaseGroupSize = 250

// leaseGroupHistory is the history length past which a group continues as
// new (plus its leases' own start).
const leaseGroupHistory = 4000

// LeaseGroupID is the workflow id of a cluster's node group g (from 1).
func LeaseGroupID(cluster string, g int) string {
	return fmt.Sprintf("%s/leases-%d", WorkflowID(cluster), g)
}

// LeaseHold asks a group to hold a node's lease for an agent process, or,
// with no AgentID, to let it go.
type LeaseHold struct {
	Node    string        `json:"node"`
	AgentID string        `json:"agent_id,omitempty"`
	Timeout time.Duration `json:"timeout,omitempty"` // its heartbeat timeout
}

// LeaseGroupState is carried across a group's continue-as-new.
type LeaseGroupState struct {
	Cluster string               `json:"cluster"`
	Group   int                  `json:"group"`
	Holds   map[string]LeaseHold `json:"holds,omitempty"` // by node
}

// LeaseGroup holds the leases its cluster asks for, renews them at the
// end of each term and signals the cluster when one ends otherwise. It
// completes when it holds none (the cluster's next hold starts it again).
func LeaseGroup(ctx workflow.Context, st LeaseGroupState) error {
	if st.Holds == nil {
		st.Holds = map[string]LeaseHold{}
	}
	g := &group{st: &st, running: map[string]lease{},
		ended: workflow.NewBufferedChannel(ctx, leaseGroupSize), reported: workflow.NewBufferedChannel(ctx, leaseGroupSize)}
	for _, name := range slices.Sorted(maps.Keys(st.Holds)) {
		g.start(ctx, st.Holds[name])
	}
	holds := workflow.GetSignalChannel(ctx, SignalLeaseHold)
	for {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(holds, func(ch workflow.ReceiveChannel, _ bool) {
			var hs []LeaseHold
			ch.Receive(ctx, &hs)
			g.apply(ctx, hs)
		})
		sel.AddReceive(g.ended, func(ch workflow.ReceiveChannel, _ bool) {
			var e LeaseEnd
			ch.Receive(ctx, &e)
			g.end(ctx, e)
		})
		sel.AddReceive(g.reported, func(ch workflow.ReceiveChannel, _ bool) {
			var gone bool
			ch.Receive(ctx, &gone)
			g.reporting--
			if gone {
				// The cluster's workflow is gone (terminated): nobody
				// decides on these leases any more.
				workflow.GetLogger(ctx).Warn("cluster workflow gone; letting the group's leases go", "cluster", st.Cluster)
				g.letGoAll()
			}
		})
		sel.Select(ctx)
		if g.reporting > 0 || holds.Len() > 0 {
			continue
		}
		if len(st.Holds) == 0 {
			return nil
		}
		if workflow.GetInfo(ctx).GetCurrentHistoryLength() > leaseGroupHistory+4*len(g.running) {
			return workflow.NewContinueAsNewError(ctx, LeaseGroupName, st)
		}
	}
}

// group is one run of a node group.
type group struct {
	st        *LeaseGroupState
	running   map[string]lease // by node
	ended     workflow.Channel // LeaseEnd from the lease coroutines
	reported  workflow.Channel // a report to the cluster done (true: the cluster is gone)
	reporting int
}

func (g *group) start(ctx workflow.Context, h LeaseHold) {
	g.running[h.Node] = lease{agentID: h.AgentID, cancel: holdLease(ctx, g.st.Cluster, h, g.ended)}
}

func (g *group) stop(node string) {
	if l, ok := g.running[node]; ok {
		l.cancel()
		delete(g.running, node)
	}
}

func (g *group) letGoAll() {
	for _, name := range slices.Sorted(maps.Keys(g.running)) {
		g.stop(name)
	}
	clear(g.st.Holds)
}

// apply takes the cluster's holds in order: a lease for a new agent
// process replaces the one before; the same one only updates its timeout
// (used from its next term).
func (g *group) apply(ctx workflow.Context, hs []LeaseHold) {
	for _, h := range hs {
		if h.AgentID == "" {
			g.stop(h.Node)
			delete(g.st.Holds, h.Node)
			continue
		}
		g.st.Holds[h.Node] = h
		if l, ok := g.running[h.Node]; ok && l.agentID == h.AgentID {
			continue
		}
		g.stop(h.Node)
		g.start(ctx, h)
	}
}

// end renews a lease whose term ended and reports the other ends of the
// current holds to the cluster.
func (g *group) end(ctx workflow.Context, e LeaseEnd) {
	h, held := g.st.Holds[e.Node]
	if !held || h.AgentID != e.AgentID || e.Outcome == leaseCancelled {
		return // an earlier agent's lease, or one let go
	}
	delete(g.running, e.Node)
	if e.Outcome == leaseRenew {
		g.start(ctx, h)
		return
	}
	delete(g.st.Holds, e.Node)
	g.reporting++
	f := workflow.SignalExternalWorkflow(ctx, WorkflowID(g.st.Cluster), "", SignalLeaseEnded, e)
	workflow.Go(ctx, func(gctx workflow.Context) {
		err := f.Get(gctx, nil)
		g.reported.Send(gctx, err != nil)
	})
}

// leaseOutbox collects the holds for the groups until the sender takes
// them: per group and node, the last one counts.
type leaseOutbox struct {
	holds   map[int]map[string]LeaseHold
	sending bool
}

func (o *leaseOutbox) add(g int, h LeaseHold) {
	if o.holds == nil {
		o.holds = map[int]map[string]LeaseHold{}
	}
	if o.holds[g] == nil {
		o.holds[g] = map[string]LeaseHold{}
	}
	o.holds[g][h.Node] = h
}

func (o *leaseOutbox) quiet() bool { return len(o.holds) == 0 && !o.sending }

// leaseGroup is n's group: the one it has, or the first with room.
func (c *controller) leaseGroup(n *nodeState) int {
	if n.LeaseGroup != 0 {
		return n.LeaseGroup
	}
	if c.leases.members == nil {
		c.leases.members = map[int]int{}
		for _, m := range c.st.Nodes {
			if m.LeaseGroup != 0 {
				c.leases.members[m.LeaseGroup]++
			}
		}
	}
	g := 1
	for c.leases.members[g] >= leaseGroupSize {
		g++
	}
	c.setLeaseGroup(n, g)
	return g
}

// setLeaseGroup puts n in group g (0: none), keeping the counts.
func (c *controller) setLeaseGroup(n *nodeState, g int) {
	if c.leases.members != nil {
		if n.LeaseGroup != 0 {
			c.leases.members[n.LeaseGroup]--
		}
		if g != 0 {
			c.leases.members[g]++
		}
	}
	n.LeaseGroup = g
}

// sendLeases starts the coroutine that sends the outbox to the groups, one
// batch at a time so that a node's holds arrive in order: one local
// activity per group in each batch (its input never enters the history).
func (c *controller) sendLeases(ctx workflow.Context) {
	o := c.leases.out
	queue := workflow.GetInfo(ctx).TaskQueueName
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	workflow.Go(ctx, func(gctx workflow.Context) {
		for {
			_ = workflow.Await(gctx, func() bool { return len(o.holds) > 0 })
			batch := o.holds
			o.holds, o.sending = nil, true
			groups := slices.Sorted(maps.Keys(batch))
			fs := make([]workflow.Future, len(groups))
			for i, g := range groups {
				in := HoldLeasesInput{Cluster: c.st.Name, Group: g, Queue: queue}
				for _, name := range slices.Sorted(maps.Keys(batch[g])) {
					in.Holds = append(in.Holds, batch[g][name])
				}
				fs[i] = workflow.ExecuteLocalActivity(lctx, holdLeases, in)
			}
			for i, g := range groups {
				if err := fs[i].Get(gctx, nil); err != nil {
					c.unsent(workflow.Now(gctx), g, batch[g], err)
				}
			}
			o.sending = false
		}
	})
}

// unsent forgets the leases a group was not told to hold: the main loop
// asks for them again.
func (c *controller) unsent(now time.Time, g int, holds map[string]LeaseHold, err error) {
	c.event(now, "node group %d not told of %d lease(s): %v", g, len(holds), err)
	for _, name := range slices.Sorted(maps.Keys(holds)) {
		if l, ok := c.leases.running[name]; ok && l.agentID == holds[name].AgentID && l.group == g {
			delete(c.leases.running, name)
			c.touchLease(name)
		}
	}
}

// letGoAll lets the groups' leases go and waits until they were told: a
// cluster that completes leaves no lease held.
func (c *controller) letGoAll(ctx workflow.Context) {
	if !c.leases.groups {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(c.leases.running)) {
		c.letGo(name, c.leases.running[name])
	}
	_ = workflow.Await(ctx, c.leases.out.quiet)
}

// holdLeases names the local activity (Activities.HoldLeases).
const holdLeases = "HoldLeases"

// HoldLeasesInput is one batch of holds for one group.
type HoldLeasesInput struct {
	Cluster string      `json:"cluster"`
	Group   int         `json:"group"`
	Queue   string      `json:"queue"` // the control plane's task queue, where groups run
	Holds   []LeaseHold `json:"holds"`
}

// HoldLeases signals a group its holds, starting it if it is not running.
func (a *Activities) HoldLeases(ctx context.Context, in HoldLeasesInput) error {
	id := LeaseGroupID(in.Cluster, in.Group)
	_, err := a.Temporal.SignalWithStartWorkflow(ctx, id, SignalLeaseHold, in.Holds,
		client.StartWorkflowOptions{ID: id, TaskQueue: in.Queue}, LeaseGroupName, LeaseGroupState{Cluster: in.Cluster, Group: in.Group})
	if err != nil {
		return fmt.Errorf("hold leases in %s: %w", id, err)
	}
	return nil
}
