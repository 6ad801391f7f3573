package cluster

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/provision"
)

// agentBatch is how many nodes one StartAgents or StopAgents activity
// takes; batches run side by side.
const agentBatch = 250

// batchedAgents says whether this run starts and stops agents in batches.
// Versioned: older histories ran one activity, and one registration timer,
// per node.
func batchedAgents(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, "batched-agents", workflow.DefaultVersion, 1) == 1
}

const agentsStartToClose = 15 * time.Minute

// agentsContext is the batch activities' options: a batch of SSH starts
// takes minutes, and its heartbeats say it progresses.
func agentsContext(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: agentsStartToClose,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
}

// bringUp starts the agents of names. It does not wait for them to
// register (startBatch); older histories did (bringUpEach).
func (c *controller) bringUp(ctx, actx workflow.Context, names []string) {
	var todo []string
	for _, name := range names {
		n := c.st.Nodes[name]
		if n == nil || n.Health == Healthy || n.Health == Idle || n.Health == Pending {
			continue
		}
		n.Health, n.Error, n.Draining, n.DrainReason = Pending, "", false, ""
		n.LastBeat = time.Time{}
		todo = append(todo, name)
	}
	forAgents(ctx, actx, todo, c.bringUpEach, c.startBatch)
}

// forAgents runs each over names as older histories did (an activity per
// node), or batch over each agentBatch of them side by side, with the
// batch activities' options, and waits for all of them.
func forAgents(ctx, actx workflow.Context, names []string, each, batch func(ctx, actx workflow.Context, names []string)) {
	if len(names) == 0 {
		return
	}
	if !batchedAgents(ctx) {
		each(ctx, actx, names)
		return
	}
	bctx := agentsContext(ctx)
	wg := workflow.NewWaitGroup(ctx)
	for b := range slices.Chunk(names, agentBatch) {
		wg.Add(1)
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer wg.Done()
			batch(gctx, bctx, b)
		})
	}
	wg.Wait(ctx)
}

// startBatch starts one batch's agents. Each has RegisterTimeout to
// register (heartbeat says when it does); stopLate stops those that do
// not. The command does not wait for them: a command running holds off
// continue-as-new, and a 1,000-node `up` that waited for every
// registration took 10,000 heartbeat signals into one run, Temporal's
// limit, before it could continue.
func (c *controller) startBatch(ctx, bctx workflow.Context, names []string) {
	in := StartAgentsInput{Cluster: c.st.Name, Secret: c.st.Settings.JoinSecret, JoinKey: c.st.Settings.JoinKey, Heartbeat: c.st.Settings.HeartbeatTimeout / 3}
	// Until the start returns (an agent may register before it does), the
	// deadline is the start's longest time and RegisterTimeout.
	by := workflow.Now(ctx).Add(agentsStartToClose + c.st.Settings.RegisterTimeout)
	for _, name := range names {
		n := c.st.Nodes[name]
		in.Nodes = append(in.Nodes, n.Spec)
		n.RegisterBy = by
	}
	var results []AgentResult
	if err := workflow.ExecuteActivity(bctx, (*Activities).StartAgents, in).Get(ctx, &results); err != nil {
		for _, name := range names {
			results = append(results, AgentResult{Node: name, Error: rootCause(err)})
		}
	}
	now := workflow.Now(ctx)
	for _, r := range results {
		n := c.st.Nodes[r.Node]
		if n == nil {
			continue
		}
		if r.Error != "" && n.LastBeat.IsZero() {
			n.Health, n.Error, n.RegisterBy = Failed, "start agent: "+r.Error, time.Time{}
			c.event(now, "node %s failed to start: %s", r.Node, n.Error)
			continue
		}
		n.Handle = r.Handle
		if n.LastBeat.IsZero() && r.Error == "" {
			n.RegisterBy = now.Add(c.st.Settings.RegisterTimeout)
		}
	}
}

// stopLate fails the nodes whose agents were started but did not register
// in time, and stops those agents so nothing is left half-started.
func (c *controller) stopLate(ctx workflow.Context) {
	now := workflow.Now(ctx)
	var late StopAgentsInput
	for _, name := range c.st.Order {
		n := c.st.Nodes[name]
		if n.RegisterBy.IsZero() || now.Before(n.RegisterBy) {
			continue
		}
		n.RegisterBy = time.Time{}
		if n.Health != Pending || !n.LastBeat.IsZero() {
			continue
		}
		n.Health = Failed
		n.Error = fmt.Sprintf("agent started but did not register within %v", c.st.Settings.RegisterTimeout)
		late.Nodes = append(late.Nodes, StopAgentInput{Node: n.Spec, Handle: n.Handle})
	}
	if len(late.Nodes) == 0 {
		return
	}
	workflow.Go(ctx, func(gctx workflow.Context) {
		_ = workflow.ExecuteActivity(agentsContext(gctx), (*Activities).StopAgents, late).Get(gctx, nil)
		for _, s := range late.Nodes {
			c.event(workflow.Now(gctx), "node %s: %s; stopped it", s.Node.Name, c.st.Nodes[s.Node.Name].Error)
		}
	})
}

// bringUpEach is bringUp of older histories: an activity and a
// registration timer per node.
func (c *controller) bringUpEach(ctx, actx workflow.Context, names []string) {
	wg := workflow.NewWaitGroup(ctx)
	for _, name := range names {
		n := c.st.Nodes[name]
		wg.Add(1)
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer wg.Done()
			var h provision.Handle
			err := workflow.ExecuteActivity(actx, (*Activities).StartAgent, StartAgentInput{Cluster: c.st.Name, Node: n.Spec, Secret: c.st.Settings.JoinSecret, JoinKey: c.st.Settings.JoinKey, Heartbeat: c.st.Settings.HeartbeatTimeout / 3}).Get(gctx, &h)
			if err != nil {
				n.Health, n.Error = Failed, rootCause(err)
				c.event(workflow.Now(gctx), "node %s failed to start: %s", n.Spec.Name, n.Error)
				return
			}
			n.Handle = h
			ok, _ := workflow.AwaitWithTimeout(gctx, c.st.Settings.RegisterTimeout, func() bool { return !n.LastBeat.IsZero() })
			if !ok {
				n.Health = Failed
				n.Error = fmt.Sprintf("agent started but did not register within %v", c.st.Settings.RegisterTimeout)
				_ = workflow.ExecuteActivity(actx, (*Activities).StopAgent, StopAgentInput{Node: n.Spec, Handle: n.Handle}).Get(gctx, nil)
				c.event(workflow.Now(gctx), "node %s: %s; stopped it", n.Spec.Name, n.Error)
				return
			}
			c.event(workflow.Now(gctx), "node %s registered (agent pid %d)", n.Spec.Name, n.AgentPID)
		})
	}
	wg.Wait(ctx)
}

// bringDown drains work (up to DrainTimeout) and stops the agents.
func (c *controller) bringDown(ctx, actx workflow.Context, names []string) {
	for _, name := range names {
		if n := c.st.Nodes[name]; n != nil {
			n.Draining = true
		}
	}
	drained, _ := workflow.AwaitWithTimeout(ctx, c.st.Settings.DrainTimeout, func() bool {
		for _, name := range names {
			if n := c.st.Nodes[name]; n != nil && len(n.Allocated) > 0 && n.Health != Dead {
				return false
			}
		}
		return true
	})
	if !drained {
		c.event(workflow.Now(ctx), "drain timed out after %v; stopping with work still running", c.st.Settings.DrainTimeout)
	}
	var todo []string
	for _, name := range names {
		if n := c.st.Nodes[name]; n != nil && n.Health != Stopped {
			todo = append(todo, name)
		}
	}
	forAgents(ctx, actx, todo, c.stopEach, c.stopBatch)
}

// stopBatch stops one batch's agents.
func (c *controller) stopBatch(ctx, bctx workflow.Context, names []string) {
	var in StopAgentsInput
	for _, name := range names {
		n := c.st.Nodes[name]
		in.Nodes = append(in.Nodes, StopAgentInput{Node: n.Spec, Handle: n.Handle})
	}
	var results []AgentResult
	if err := workflow.ExecuteActivity(bctx, (*Activities).StopAgents, in).Get(ctx, &results); err != nil {
		for _, name := range names {
			results = append(results, AgentResult{Node: name, Error: rootCause(err)})
		}
	}
	for _, r := range results {
		c.stopped(workflow.Now(ctx), r.Node, r.Error)
	}
}

// stopEach stops agents as older histories did: an activity per node.
func (c *controller) stopEach(ctx, actx workflow.Context, names []string) {
	wg := workflow.NewWaitGroup(ctx)
	for _, name := range names {
		n := c.st.Nodes[name]
		wg.Add(1)
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer wg.Done()
			var why string
			if err := workflow.ExecuteActivity(actx, (*Activities).StopAgent, StopAgentInput{Node: n.Spec, Handle: n.Handle}).Get(gctx, nil); err != nil {
				why = rootCause(err)
			}
			c.stopped(workflow.Now(gctx), name, why)
		})
	}
	wg.Wait(ctx)
}

// stopped applies a node's stop: stopped, or why not.
func (c *controller) stopped(now time.Time, name, why string) {
	n := c.st.Nodes[name]
	if n == nil {
		return
	}
	if why != "" {
		n.Error = "stop: " + why
		c.event(now, "node %s: %s", name, n.Error)
		return
	}
	n.Health, n.Allocated, n.Draining = Stopped, nil, false
	c.touchLease(name)
	c.st.Ledger.Close("", name, now)
	c.event(now, "node %s stopped", name)
}
