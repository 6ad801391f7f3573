package api

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/trainyard/trainyard/workflows/cluster"
)

// statusCall is one in-flight query of a cluster's status.
type statusCall struct {
	done chan struct{}
	st   cluster.Status
	err  error
}

var (
	statusMu    sync.Mutex
	statusCalls = map[string]*statusCall{}
)

// clusterStatus returns the cluster's status. Concurrent callers share one
// query: every query is a task on the control worker, and a burst of 200
// submissions asking one by one made the last ones time out.
func (s *Server) clusterStatus(ctx context.Context, name string) (cluster.Status, error) {
	key := fmt.Sprintf("%p/%s", s, name)
	statusMu.Lock()
	c, ok := statusCalls[key]
	if !ok {
		c = &statusCall{done: make(chan struct{})}
		statusCalls[key] = c
		// Not the first caller's context: its cancellation must not fail the others.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		go func() {
			defer cancel()
			c.st, c.err = s.queryClusterStatus(qctx, name)
			statusMu.Lock()
			delete(statusCalls, key)
			statusMu.Unlock()
			close(c.done)
		}()
	}
	statusMu.Unlock()
	select {
	case <-c.done:
		return c.st, c.err
	case <-ctx.Done():
		return cluster.Status{}, temporalErr("cluster "+name, ctx.Err())
	}
}
