package cluster

import (
	"context"

	agentdrain "github.com/trainyard/trainyard/internal/agent/drain"
)

// AgentActivities run on a node's agent for its cluster workflow.
type AgentActivities struct {
	Drain *agentdrain.Signal
}

// DrainNode starts the agent's drain: its runs checkpoint at once and move.
func (a *AgentActivities) DrainNode(_ context.Context, req DrainRequest) error {
	a.Drain.Start(req.Reason, req.Deadline)
	return nil
}

// UndrainNode lets the agent take work again.
func (a *AgentActivities) UndrainNode(context.Context) error {
	a.Drain.Stop()
	return nil
}
