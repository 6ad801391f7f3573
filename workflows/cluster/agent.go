package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	agentdrain "github.com/trainyard/trainyard/internal/agent/drain"
)

// AgentActivities run on a node's agent for its cluster workflow.
type AgentActivities struct {
	Drain *agentdrain.Signal
	// AgentID is this agent process's (its heartbeats'); Lease records
	// whether it holds its node's lease.
	AgentID string
	Lease   *LeaseHolder
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

// HoldLease holds the node's lease for this agent process: it heartbeats
// until the term ends (the workflow renews it), the workflow lets it go or
// the agent stops;
// its heartbeats stopping is how the cluster learns the node is gone.
func (a *AgentActivities) HoldLease(ctx context.Context, req LeaseRequest) error {
	if req.AgentID != a.AgentID {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("lease of node %s is for agent %s; this is agent %s", req.Node, req.AgentID, a.AgentID), ErrLeaseNotMine, nil)
	}
	a.Lease.hold(true)
	defer a.Lease.hold(false)
	every := max(req.Every, 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	term := time.NewTimer(req.Term)
	defer term.Stop()
	for {
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-activity.GetWorkerStopChannel(ctx):
			// The agent stops: its worker's stop would otherwise wait its
			// whole timeout for this activity. The renewed lease finds no
			// agent, and the node is Dead after heartbeat_timeout.
			return nil
		case <-term.C:
			return nil
		case <-t.C:
		}
	}
}

// LeaseHolder is what an agent knows of its lease: whether it holds one
// now, and since when it holds none. An agent without one for a while
// tells the cluster it is there (a heartbeat signal): the node was
// declared Dead, or the cluster went down and up, or the control plane is
// an older one that hands out no leases.
type LeaseHolder struct {
	mu    sync.Mutex
	held  int
	ever  bool      // one was held: the cluster hands them out
	since time.Time // when the last lease ended (or the holder was made)
}

// NewLeaseHolder is a holder with no lease since now.
func NewLeaseHolder() *LeaseHolder { return &LeaseHolder{since: time.Now()} }

func (l *LeaseHolder) hold(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on {
		l.held++
		l.ever = true
		return
	}
	l.held--
	if l.held == 0 {
		l.since = time.Now()
	}
}

// Lacking says whether no lease has been held for longer than d.
func (l *LeaseHolder) Lacking(d time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held == 0 && time.Since(l.since) > d
}

// Ever says whether a lease was ever held.
func (l *LeaseHolder) Ever() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ever
}

// Reset restarts the wait for a lease (after the agent told the cluster).
func (l *LeaseHolder) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == 0 {
		l.since = time.Now()
	}
}
