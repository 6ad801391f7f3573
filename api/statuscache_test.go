package api

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trainyard/trainyard/workflows/cluster"
)

// TestStatusWithin: a status read that accepts an older answer gets the
// last one, marked with its age, when the cluster is slow to answer, and
// only if it is recent enough; otherwise, and without max age, it waits
// for the fresh one.
func TestStatusWithin(t *testing.T) {
	var queries atomic.Int32
	gate := make(chan struct{})
	query := func(ctx context.Context, name string) (cluster.Status, error) {
		n := queries.Add(1)
		select {
		case <-gate:
		case <-ctx.Done():
			return cluster.Status{}, ctx.Err()
		}
		return cluster.Status{Cluster: name, Events: []string{string(rune('0' + n))}}, nil
	}
	open := func() { gate <- struct{}{} }
	var sc statusCalls
	ctx := context.Background()

	for _, tc := range []struct {
		name    string
		lastAge time.Duration // the last answer's age before the read; 0: none
		maxAge  time.Duration
		stale   bool // answered with the last one
	}{
		{"no last answer: waits", 0, 10 * time.Second, false},
		{"a recent last answer", 2 * time.Second, 10 * time.Second, true},
		{"the last answer too old: waits", 20 * time.Second, 10 * time.Second, false},
		{"no max age: waits", 2 * time.Second, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc.mu.Lock()
			sc.latest = nil
			if tc.lastAge > 0 {
				sc.latest = map[string]snapshot{"lab": {cluster.Status{Cluster: "lab", Events: []string{"last"}}, time.Now().Add(-tc.lastAge)}}
			}
			sc.mu.Unlock()
			var wg sync.WaitGroup
			readers := 1 // waiting ones: each starts its own query once the last ended
			if tc.stale {
				readers = 3
			}
			got := make([]cluster.Status, readers)
			for i := range got {
				wg.Go(func() {
					st, err := sc.within(ctx, "lab", tc.maxAge, query)
					if err != nil {
						t.Error(err)
					}
					got[i] = st
				})
			}
			if tc.stale {
				wg.Wait() // answered without the query
				open()
			} else {
				open()
				wg.Wait()
			}
			for _, st := range got {
				if isStale := st.Events[0] == "last"; isStale != tc.stale || (st.AgeS > 0) != tc.stale {
					t.Fatalf("answer %v (age %v s): want the last one %v", st.Events, st.AgeS, tc.stale)
				}
			}
			// The query went on; its answer is the latest now.
			for {
				if last, ok := sc.last("lab"); ok && last.st.Events[0] != "last" {
					if last.st.AgeS != 0 {
						t.Fatalf("the shared snapshot was changed: age %v", last.st.AgeS)
					}
					break
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	if n := queries.Load(); n != 4 {
		t.Fatalf("%d queries for 4 rounds: want one a round", n)
	}
}
