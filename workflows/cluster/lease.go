package cluster

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Liveness outside the history. A node's agent, once its signed heartbeat
// has registered it, holds a lease: one long activity on the node's task
// queue that it heartbeats. Activity heartbeats are kept in the
// execution's mutable state, not its history, and their timeout is a
// timer of the Temporal server, so a node's death is decided there, once,
// whichever `server`/`worker` replica runs this workflow and across a kill
// -9 of all of them. The heartbeat signal carries changes only (joined,
// resources, drain, address, a new agent process); an agent whose lease
// ended re-announces itself with one.

// LeaseRequest is a lease for one agent process of a node.
type LeaseRequest struct {
	Node    string `json:"node"`
	AgentID string `json:"agent_id"`
	// Every is how often the agent heartbeats it; Term is when it ends
	// (the workflow then starts the next).
	Every time.Duration `json:"every"`
	Term  time.Duration `json:"term"`
}

// GPUBusyPct is the utilisation at which a GPU counts as in use by
// something outside the cluster's allocations (the self-play idle
// scheduler leaves it alone); an agent reports crossing it as a change.
const GPUBusyPct = 10

// ErrLeaseNotMine is the error type of a lease its agent refused: it was
// meant for another agent process of the node (an earlier one).
const ErrLeaseNotMine = "LeaseNotMine"

// leaseTerm is how long one lease activity runs before it is renewed:
// each renewal is a few history events per node.
const leaseTerm = 30 * time.Minute

// maxLeases bounds the leases one cluster holds, below Temporal's limit of
// pending activities per execution (2,000 by default); nodes beyond it are
// judged by their heartbeat signals, as older agents are.
const maxLeases = 1500

// leaseOutcome is how a lease activity ended.
type leaseOutcome string

const (
	leaseRenew       leaseOutcome = "renew"       // its term ended
	leaseFailed      leaseOutcome = "failed"      // the agent ended it with an error: it is there
	leaseLost        leaseOutcome = "lost"        // its heartbeats stopped, or no agent took it
	leaseCancelled   leaseOutcome = "cancelled"   // the workflow let it go
	leaseRefused     leaseOutcome = "refused"     // another agent process of the node has it
	leaseUnsupported leaseOutcome = "unsupported" // an agent that holds no leases
)

// LeaseEnd is a lease activity's end: sent to the main loop by the run's
// own lease coroutines, or signalled (SignalLeaseEnded) by the node-group
// workflow that held it.
type LeaseEnd struct {
	Node    string       `json:"node"`
	AgentID string       `json:"agent_id"`
	Outcome leaseOutcome `json:"outcome"`
	Why     string       `json:"why,omitempty"`
	// Timeout is the lease's heartbeat timeout.
	Timeout time.Duration `json:"timeout"`
}

// leaseBeatsPerSecond caps the lease heartbeats one cluster takes, as
// Nomad caps node heartbeats (max_heartbeats_per_second, 50, its TTL
// growing with the fleet). Each is an update of the cluster execution's
// state in Temporal, under its lock: at 1,000 nodes beating every 5 s,
// 200 a second timed out ("context deadline exceeded"), nodes were
// declared Dead and placements crawled. Clusters of more than 250 nodes
// learn of a death later: after 60 ms per node, 60 s at 1,000.
const leaseBeatsPerSecond = 50

// leaseTimeout is a lease's heartbeat timeout: the cluster's
// heartbeat_timeout, or longer where the fleet's lease beats would pass
// leaseBeatsPerSecond.
func (c *controller) leaseTimeout() time.Duration {
	every := time.Duration(len(c.st.Nodes)) * time.Second / leaseBeatsPerSecond
	return max(c.st.Settings.HeartbeatTimeout, 3*every)
}

// lease is a running lease: its activity in this run (cancel), or its
// hold in a node-group workflow (group).
type lease struct {
	agentID string
	cancel  workflow.CancelFunc
	group   int
}

// leases are the lease activities of one workflow run, or (lease-groups)
// what this run asked the node groups to hold. Not state: a run continued
// as new asks again.
type leases struct {
	on bool
	// groups: node-group workflows hold the leases (leasegroup.go), so
	// their heartbeats, pending activities and coroutines are not this
	// execution's.
	groups  bool
	running map[string]lease // by node
	failed  map[string]int   // leases in a row the node's agent ended with an error
	want    []string         // nodes to look at: start, renew or drop
	wanted  map[string]bool  // want as a set
	ended   workflow.ReceiveChannel
	own     workflow.Channel // ends of this run's own lease activities (before lease-groups)
	out     *leaseOutbox     // holds not yet sent to the groups (lease-groups)
	members map[int]int      // nodes per group, counted once a run (nil: not yet)
}

func newLeases(ctx workflow.Context, on, groups bool) *leases {
	l := &leases{on: on, groups: on && groups, running: map[string]lease{}, failed: map[string]int{}, wanted: map[string]bool{}}
	if l.groups {
		l.ended = workflow.GetSignalChannel(ctx, SignalLeaseEnded)
		l.out = &leaseOutbox{}
	} else {
		l.own = workflow.NewBufferedChannel(ctx, maxLeases)
		l.ended = l.own
	}
	return l
}

// judgedByLease says whether n's health is its lease's: checkHealth leaves
// it alone.
func (c *controller) judgedByLease(n *nodeState) bool {
	return c.leases != nil && c.leases.on && !n.NoLease
}

// touchLease asks the main loop to look at name's lease.
func (c *controller) touchLease(name string) {
	l := c.leases
	if l == nil || !l.on || l.wanted[name] {
		return
	}
	if l.wanted == nil {
		l.wanted = map[string]bool{}
	}
	l.wanted[name] = true
	l.want = append(l.want, name)
}

// syncLeases starts a lease for each touched node that is live and has
// none for its agent, and lets go of those of nodes no longer live.
func (c *controller) syncLeases(ctx workflow.Context) {
	want := c.leases.want
	c.leases.want = nil
	clear(c.leases.wanted)
	for _, name := range want {
		n := c.st.Nodes[name]
		l, held := c.leases.running[name]
		live := n != nil && (n.Health == Healthy || n.Health == Idle) && n.AgentID != "" && !n.NoLease
		switch {
		case held && (!live || l.agentID != n.AgentID):
			c.letGo(name, l)
			if live {
				c.startLease(ctx, name, n)
			}
		case !held && live:
			c.startLease(ctx, name, n)
		case !held && n != nil && n.LeaseGroup != 0 && c.leases.groups:
			// A group may hold a lease an earlier run asked for.
			c.leases.out.add(n.LeaseGroup, LeaseHold{Node: name})
			c.setLeaseGroup(n, 0)
		}
	}
}

func (c *controller) letGo(name string, l lease) {
	delete(c.leases.running, name)
	if l.cancel != nil {
		l.cancel()
		return
	}
	c.leases.out.add(l.group, LeaseHold{Node: name})
	if n := c.st.Nodes[name]; n != nil {
		c.setLeaseGroup(n, 0) // told once; its next lease may be in another group
	}
}

func (c *controller) startLease(ctx workflow.Context, name string, n *nodeState) {
	timeout := c.leaseTimeout()
	if c.leases.groups {
		g := c.leaseGroup(n)
		c.leases.running[name] = lease{agentID: n.AgentID, group: g}
		c.leases.out.add(g, LeaseHold{Node: name, AgentID: n.AgentID, Timeout: timeout})
		return
	}
	if len(c.leases.running) >= maxLeases {
		c.judgeByBeats(workflow.Now(ctx), name, fmt.Sprintf("the cluster holds %d leases already", maxLeases))
		return
	}
	cancel := holdLease(ctx, c.st.Name, LeaseHold{Node: name, AgentID: n.AgentID, Timeout: timeout}, c.leases.own)
	c.leases.running[name] = lease{agentID: n.AgentID, cancel: cancel}
}

// holdLease runs one lease activity on the node's task queue and sends
// its end to ended.
func holdLease(ctx workflow.Context, cluster string, h LeaseHold, ended workflow.Channel) workflow.CancelFunc {
	lctx, cancel := workflow.WithCancel(ctx)
	actx := workflow.WithActivityOptions(lctx, workflow.ActivityOptions{
		TaskQueue:              NodeQueue(cluster, h.Node),
		ScheduleToStartTimeout: h.Timeout,
		StartToCloseTimeout:    leaseTerm + h.Timeout,
		HeartbeatTimeout:       h.Timeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	req := LeaseRequest{Node: h.Node, AgentID: h.AgentID, Every: h.Timeout / 3, Term: leaseTerm}
	f := workflow.ExecuteActivity(actx, (*AgentActivities).HoldLease, req)
	workflow.Go(ctx, func(gctx workflow.Context) {
		err := f.Get(gctx, nil)
		outcome, why := classifyLease(err)
		ended.Send(gctx, LeaseEnd{Node: h.Node, AgentID: h.AgentID, Outcome: outcome, Why: why, Timeout: h.Timeout})
	})
	return cancel
}

func classifyLease(err error) (leaseOutcome, string) {
	var timeout *temporal.TimeoutError
	var cancelled *temporal.CanceledError
	var app *temporal.ApplicationError
	switch {
	case err == nil:
		return leaseRenew, ""
	case errors.As(err, &cancelled):
		return leaseCancelled, ""
	case errors.As(err, &timeout):
		return leaseLost, timeout.TimeoutType().String()
	case errors.As(err, &app) && app.Type() == ErrLeaseNotMine:
		return leaseRefused, app.Message()
	case errors.As(err, &app) && strings.Contains(app.Message(), "unable to find activityType"):
		return leaseUnsupported, ""
	}
	// The agent itself ended it (its heartbeats failed while Temporal
	// restarted, and the SDK cancelled it): the agent is alive.
	return leaseFailed, err.Error()
}

// maxLeaseFailures is how many leases in a row an agent may end with an
// error before its node is judged by heartbeat signals instead: each
// renewal is history events.
const maxLeaseFailures = 3

// leaseEnded applies a lease's end: a lost lease of the node's current
// agent makes the node Dead; a finished term is renewed; a lease an older
// agent process held, or one refused by the agent there now, changes
// nothing (the new process registers with its own beat).
func (c *controller) leaseEnded(now time.Time, e LeaseEnd) {
	n := c.st.Nodes[e.Node]
	if l, ok := c.leases.running[e.Node]; ok && l.agentID == e.AgentID {
		delete(c.leases.running, e.Node)
		if c.leases.groups && n != nil {
			c.setLeaseGroup(n, 0) // the group let it go when it reported
		}
	}
	if n == nil || n.AgentID != e.AgentID {
		return
	}
	if e.Outcome != leaseFailed {
		delete(c.leases.failed, e.Node)
	}
	switch e.Outcome {
	case leaseRenew:
		c.touchLease(e.Node)
	case leaseFailed:
		c.leases.failed[e.Node]++
		if c.leases.failed[e.Node] < maxLeaseFailures {
			c.touchLease(e.Node)
			break
		}
		delete(c.leases.failed, e.Node)
		c.judgeByBeats(now, e.Node, fmt.Sprintf("its agent ended %d leases in a row with an error (the last: %s)", maxLeaseFailures, e.Why))
	case leaseUnsupported:
		c.judgeByBeats(now, e.Node, "its agent holds no lease (an older agent)")
	case leaseLost:
		if n.Health == Healthy || n.Health == Idle {
			c.declareDead(now, e.Node, "lease lost: "+leaseWhy(e.Why, e.Timeout))
		}
	}
}

// judgeByBeats has a node's heartbeat signals decide its health from now
// on. Its agent, holding no lease, signals every beat; until its first,
// the node counts as heard from now.
func (c *controller) judgeByBeats(now time.Time, name, why string) {
	n := c.st.Nodes[name]
	n.NoLease, n.LastBeat = true, now
	c.event(now, "node %s: %s; its heartbeats decide its health", name, why)
}

func leaseWhy(timeoutType string, d time.Duration) string {
	switch timeoutType {
	case "ScheduleToStart":
		return "no agent took its lease within " + d.String()
	case "Heartbeat":
		return "no heartbeat for " + d.String()
	}
	return timeoutType
}

// takeLeaseEnds applies every lease end already received.
func (c *controller) takeLeaseEnds(ctx workflow.Context) {
	for c.leases != nil {
		var e LeaseEnd
		if !c.leases.ended.ReceiveAsync(&e) {
			return
		}
		c.leaseEnded(workflow.Now(ctx), e)
	}
}
