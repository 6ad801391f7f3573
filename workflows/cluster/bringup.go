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

// agentsContext is the batch activities' options: a batch of SSH starts
// takes minutes, and its heartbeats say it progresses.
func agentsContext(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
}

// bringUp starts the agents of names and waits for each to register or
// fail; a node that never registers is stopped again so nothing is left
// half-started.
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
	if len(todo) == 0 {
		return
	}
	if !batchedAgents(ctx) {
		c.bringUpEach(ctx, actx, todo)
		return
	}
	c.upBatched = true
	bctx := agentsContext(ctx)
	wg := workflow.NewWaitGroup(ctx)
	for batch := range slices.Chunk(todo, agentBatch) {
		wg.Add(1)
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer wg.Done()
			c.startBatch(gctx, bctx, batch)
		})
	}
	wg.Wait(ctx)
}

// startBatch starts one batch's agents, waits up to RegisterTimeout for
// them to register (heartbeat says when each does) and stops those that
// did not.
func (c *controller) startBatch(ctx, bctx workflow.Context, names []string) {
	in := StartAgentsInput{Cluster: c.st.Name, Secret: c.st.Settings.JoinSecret, JoinKey: c.st.Settings.JoinKey, Heartbeat: c.st.Settings.HeartbeatTimeout / 3}
	for _, name := range names {
		in.Nodes = append(in.Nodes, c.st.Nodes[name].Spec)
	}
	var results []AgentResult
	if err := workflow.ExecuteActivity(bctx, (*Activities).StartAgents, in).Get(ctx, &results); err != nil {
		for _, name := range names {
			results = append(results, AgentResult{Node: name, Error: rootCause(err)})
		}
	}
	var started []string
	for _, r := range results {
		n := c.st.Nodes[r.Node]
		if n == nil {
			continue
		}
		if r.Error != "" {
			n.Health, n.Error = Failed, "start agent: "+r.Error
			c.event(workflow.Now(ctx), "node %s failed to start: %s", r.Node, n.Error)
			continue
		}
		n.Handle = r.Handle
		started = append(started, r.Node)
	}
	registered := func(name string) bool { return !c.st.Nodes[name].LastBeat.IsZero() }
	if ok, _ := workflow.AwaitWithTimeout(ctx, c.st.Settings.RegisterTimeout, func() bool {
		return !slices.ContainsFunc(started, func(name string) bool { return !registered(name) })
	}); ok {
		return
	}
	var late StopAgentsInput
	for _, name := range started {
		if n := c.st.Nodes[name]; !registered(name) {
			n.Health = Failed
			n.Error = fmt.Sprintf("agent started but did not register within %v", c.st.Settings.RegisterTimeout)
			late.Nodes = append(late.Nodes, StopAgentInput{Node: n.Spec, Handle: n.Handle})
		}
	}
	_ = workflow.ExecuteActivity(bctx, (*Activities).StopAgents, late).Get(ctx, nil)
	for _, s := range late.Nodes {
		c.event(workflow.Now(ctx), "node %s: %s; stopped it", s.Node.Name, c.st.Nodes[s.Node.Name].Error)
	}
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
	if len(todo) == 0 {
		return
	}
	if !batchedAgents(ctx) {
		c.stopEach(ctx, actx, todo)
		return
	}
	bctx := agentsContext(ctx)
	wg := workflow.NewWaitGroup(ctx)
	for batch := range slices.Chunk(todo, agentBatch) {
		wg.Add(1)
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer wg.Done()
			var in StopAgentsInput
			for _, name := range batch {
				n := c.st.Nodes[name]
				in.Nodes = append(in.Nodes, StopAgentInput{Node: n.Spec, Handle: n.Handle})
			}
			var results []AgentResult
			if err := workflow.ExecuteActivity(bctx, (*Activities).StopAgents, in).Get(gctx, &results); err != nil {
				for _, name := range batch {
					results = append(results, AgentResult{Node: name, Error: rootCause(err)})
				}
			}
			for _, r := range results {
				c.stopped(workflow.Now(gctx), r.Node, r.Error)
			}
		})
	}
	wg.Wait(ctx)
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
