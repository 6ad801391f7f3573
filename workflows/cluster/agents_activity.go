package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/joinkey"
	"github.com/trainyard/trainyard/internal/provision"
)

// Agents are started and stopped in batches: one activity for many nodes.
// One activity per node was three history events each, and `up` of a
// 1,000-node cluster (one command, so no continue-as-new until it ended)
// filled the history past Temporal's limits before the nodes were up.

// StartAgentsInput names the nodes of one batch.
type StartAgentsInput struct {
	Cluster string      `json:"cluster"`
	Nodes   []spec.Node `json:"nodes"`
	// JoinKey names the cluster's join token by its public half; the
	// activity loads the token itself so it never enters the history.
	JoinKey string `json:"join_key,omitempty"`
	// Secret is the legacy join secret (workflows started before join keys).
	Secret    string        `json:"secret,omitempty"`
	Heartbeat time.Duration `json:"heartbeat"`
}

// AgentResult is one node's outcome in a batch: its handle, or why it
// could not be started (or stopped).
type AgentResult struct {
	Node   string           `json:"node"`
	Handle provision.Handle `json:"handle"`
	Error  string           `json:"error,omitempty"`
}

// StopAgentsInput names the nodes of one batch and their handles.
type StopAgentsInput struct {
	Nodes []StopAgentInput `json:"nodes"`
}

// agentParallel bounds the starts (SSH sessions, cloud calls) a batch
// runs at once; agentAttempts is how often each node is tried.
const (
	agentParallel = 16
	agentAttempts = 3
)

// StartAgents starts the agents of in.Nodes; a node that fails after
// agentAttempts tries is reported in its result, not as the activity's
// error, so the others' starts are not repeated.
func (a *Activities) StartAgents(ctx context.Context, in StartAgentsInput) ([]AgentResult, error) {
	token := in.Secret
	if in.JoinKey != "" {
		t, err := joinkey.Load(ctx, a.Tokens, in.Cluster, in.JoinKey)
		if err != nil {
			return nil, fmt.Errorf("start agents: %w", err)
		}
		token = t.String()
	}
	return eachNode(ctx, len(in.Nodes), func(i int) AgentResult {
		n := in.Nodes[i]
		h, err := a.Provisioners.Start(ctx, n, a.Launch(in.Cluster, n, token, in.Heartbeat))
		return AgentResult{Node: n.Name, Handle: h, Error: errText(err)}
	}), nil
}

// StopAgents stops the agents of in.Nodes, each reported in its result.
func (a *Activities) StopAgents(ctx context.Context, in StopAgentsInput) ([]AgentResult, error) {
	return eachNode(ctx, len(in.Nodes), func(i int) AgentResult {
		n := in.Nodes[i]
		return AgentResult{Node: n.Node.Name, Handle: n.Handle, Error: errText(a.Provisioners.Stop(ctx, n.Node, n.Handle))}
	}), nil
}

// eachNode runs do for 0…n-1, agentParallel at a time, each up to
// agentAttempts times while it fails, heartbeating the activity's progress.
func eachNode(ctx context.Context, n int, do func(i int) AgentResult) []AgentResult {
	out := make([]AgentResult, n)
	sem := make(chan struct{}, agentParallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			for attempt := 1; ; attempt++ {
				out[i] = do(i)
				if out[i].Error == "" || attempt == agentAttempts || ctx.Err() != nil {
					break
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(attempt) * time.Second):
				}
			}
			mu.Lock()
			done++
			if activity.IsActivity(ctx) {
				activity.RecordHeartbeat(ctx, done)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return rootCause(err)
}
