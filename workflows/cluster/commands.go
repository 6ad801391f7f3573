package cluster

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/cluster/spec"
)

func (c *controller) run(ctx, actx workflow.Context, cmd Command) {
	now := workflow.Now(ctx)
	switch cmd.Op {
	case OpUp:
		c.st.Desired = "up"
		if cmd.Spec != nil {
			c.merge(*cmd.Spec)
		}
		c.event(now, "up requested for %d node(s)", len(c.st.Order))
		c.bringUp(ctx, actx, c.st.Order)
	case OpDown:
		c.event(now, "down requested")
		c.st.Desired = "down"
		c.bringDown(ctx, actx, c.st.Order)
	case OpRestart:
		c.event(now, "restart requested")
		c.bringDown(ctx, actx, c.st.Order)
		c.st.Desired = "up"
		c.bringUp(ctx, actx, c.st.Order)
	case OpAdd:
		if cmd.Node == nil {
			return
		}
		if _, ok := c.st.Nodes[cmd.Node.Name]; ok {
			c.event(now, "add-node %s: already in the cluster", cmd.Node.Name)
			return
		}
		c.st.Nodes[cmd.Node.Name] = &nodeState{Spec: *cmd.Node, Health: Stopped}
		c.st.Order = append(c.st.Order, cmd.Node.Name)
		c.event(now, "node %s added", cmd.Node.Name)
		if c.st.Desired == "up" {
			c.bringUp(ctx, actx, []string{cmd.Node.Name})
		}
	case OpRemove:
		if _, ok := c.st.Nodes[cmd.Name]; !ok {
			c.event(now, "remove-node %s: no such node", cmd.Name)
			return
		}
		c.bringDown(ctx, actx, []string{cmd.Name})
		delete(c.st.Nodes, cmd.Name)
		c.touchLease(cmd.Name)
		c.st.Order = slices.DeleteFunc(c.st.Order, func(n string) bool { return n == cmd.Name })
		c.event(workflow.Now(ctx), "node %s removed", cmd.Name)
	case OpDrain, OpUndrain:
		c.drainNode(ctx, cmd)
	}
}

// drainNode marks a node draining (or not) and tells its agent, whose runs
// then checkpoint at once and move; an agent that cannot be reached is
// noted, and the mark alone still keeps new work off the node.
func (c *controller) drainNode(ctx workflow.Context, cmd Command) {
	now := workflow.Now(ctx)
	n, ok := c.st.Nodes[cmd.Name]
	if !ok {
		c.event(now, "%s %s: no such node", cmd.Op, cmd.Name)
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              NodeQueue(c.st.Name, cmd.Name),
		ScheduleToStartTimeout: 10 * time.Second,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	live := n.Health == Healthy || n.Health == Idle
	var err error
	if cmd.Op == OpDrain {
		n.Draining, n.DrainReason = true, fmt.Sprintf("drain requested (deadline %v)", cmd.Deadline)
		c.event(now, "node %s drains: %s", cmd.Name, n.DrainReason)
		if live {
			err = workflow.ExecuteActivity(actx, (*AgentActivities).DrainNode, DrainRequest{Reason: n.DrainReason, Deadline: now.Add(cmd.Deadline)}).Get(ctx, nil)
		}
	} else {
		if workflow.GetVersion(ctx, "undrain-ignores-stale-beats", workflow.DefaultVersion, 1) == 1 {
			// Beats the agent sent before it heard this still say it drains:
			// they must not mark the node draining again (they did, and
			// with the same agent nothing cleared it).
			n.Undrained = n.DrainReason
		}
		n.Draining, n.DrainReason = false, ""
		c.event(now, "node %s takes work again", cmd.Name)
		if live {
			err = workflow.ExecuteActivity(actx, (*AgentActivities).UndrainNode).Get(ctx, nil)
		}
	}
	if err != nil {
		c.event(workflow.Now(ctx), "%s %s: agent not told: %v", cmd.Op, cmd.Name, err)
		n.Undrained = "" // it drains still: its beats say so
	}
}

// merge takes nodes of a (re)submitted spec; nodes already known keep their
// runtime state, so `up` twice is a no-op.
func (c *controller) merge(s spec.Cluster) {
	c.st.Endpoints = slices.Clone(s.Endpoints) // the resubmitted spec's, as declared
	for _, n := range s.Nodes {
		if ns, ok := c.st.Nodes[n.Name]; ok {
			ns.Spec = n
			continue
		}
		c.st.Nodes[n.Name] = &nodeState{Spec: n, Health: Stopped}
		c.st.Order = append(c.st.Order, n.Name)
	}
}
