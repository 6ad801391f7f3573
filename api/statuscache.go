package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/trainyard/trainyard/workflows/cluster"
)

// statusQuery asks a cluster workflow for its status (queryClusterStatus).
type statusQuery func(ctx context.Context, name string) (cluster.Status, error)

// statusCall is one in-flight query of a cluster's status.
type statusCall struct {
	done chan struct{}
	st   cluster.Status
	err  error
}

// statusCalls are the queries in flight, by cluster, and the latest
// answer of each.
type statusCalls struct {
	mu     sync.Mutex
	calls  map[string]*statusCall
	latest map[string]snapshot
}

// snapshot is a status and when it was answered.
type snapshot struct {
	st cluster.Status
	at time.Time
}

// snapshotAge is how old a status preflight may pass work on. Preflight
// only fails fast: the cluster workflow decides admission and placement
// again on its own state when it takes the work, and a refusal is checked
// again on a fresh status, so a second-old view refuses nothing wrongly,
// and a burst of submissions costs the busy cluster execution one query a
// second instead of one each (a shared snapshot: read it, never change it).
const snapshotAge = time.Second

// staleSnapshotAge is how old a status preflight may pass work on when the
// cluster execution is too busy to answer a query.
const staleSnapshotAge = 30 * time.Second

// statusPatience is how long a status read that accepts an older answer
// waits for a fresh one: a query of a busy cluster execution waits for
// its workflow task, seconds at 1,000 nodes under load.
const statusPatience = 400 * time.Millisecond

func (sc *statusCalls) last(name string) (snapshot, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	last, ok := sc.latest[name]
	return last, ok
}

// snapshot is the cluster's status as of at most snapshotAge ago; cached
// says it was not queried for this call.
func (sc *statusCalls) snapshot(ctx context.Context, name string, query statusQuery) (st cluster.Status, cached bool, err error) {
	last, ok := sc.last(name)
	if ok && time.Since(last.at) < snapshotAge {
		return last.st, true, nil
	}
	st, err = sc.get(ctx, name, query)
	var busy huma.StatusError // temporalErr's 429: too busy to answer
	if errors.As(err, &busy) && busy.GetStatus() == http.StatusTooManyRequests && ok && time.Since(last.at) < staleSnapshotAge {
		return last.st, true, nil // a busy cluster: the last view, not a 429
	}
	return st, false, err
}

// within is the cluster's status, or, when a fresh one takes longer than
// statusPatience, the last one answered if it is at most maxAge old (its
// AgeS says how old). The query goes on, and its answer is the next
// caller's.
func (sc *statusCalls) within(ctx context.Context, name string, maxAge time.Duration, query statusQuery) (cluster.Status, error) {
	if maxAge <= 0 {
		return sc.get(ctx, name, query)
	}
	qctx, cancel := context.WithTimeout(ctx, statusPatience)
	defer cancel()
	st, err := sc.get(qctx, name, query)
	if err == nil || ctx.Err() != nil || !errors.Is(qctx.Err(), context.DeadlineExceeded) {
		return st, err
	}
	if last, ok := sc.last(name); ok && time.Since(last.at) <= maxAge {
		st = last.st // a copy: the snapshot is shared and stays unchanged
		st.AgeS = time.Since(last.at).Round(100 * time.Millisecond).Seconds()
		return st, nil
	}
	return sc.get(ctx, name, query)
}

// get returns the cluster's status. Concurrent callers share one query:
// every query is a task on the control worker, and a burst of 200
// submissions asking one by one made the last ones time out.
func (sc *statusCalls) get(ctx context.Context, name string, query statusQuery) (cluster.Status, error) {
	sc.mu.Lock()
	c, ok := sc.calls[name]
	if !ok {
		c = &statusCall{done: make(chan struct{})}
		if sc.calls == nil {
			sc.calls = map[string]*statusCall{}
		}
		sc.calls[name] = c
		// Not the first caller's context: its cancellation must not fail the others.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		go func() {
			defer cancel()
			c.st, c.err = query(qctx, name)
			sc.mu.Lock()
			delete(sc.calls, name)
			if c.err == nil {
				if sc.latest == nil {
					sc.latest = map[string]snapshot{}
				}
				sc.latest[name] = snapshot{c.st, time.Now()}
			}
			sc.mu.Unlock()
			close(c.done)
		}()
	}
	sc.mu.Unlock()
	select {
	case <-c.done:
		return c.st, c.err
	case <-ctx.Done():
		return cluster.Status{}, temporalErr("cluster "+name, ctx.Err())
	}
}
