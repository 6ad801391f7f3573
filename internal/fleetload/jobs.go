package fleetload

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// The API shows no placement time: GET /v1/jobs/{id} has the job's state
// now (waiting, running, done) and WaitingSince only while it waits. The
// job's Temporal history has it: each completed Allocate activity is a
// placement the cluster committed, and the first one's event time is when
// the job was placed. The tracker reads each job's history once it has
// closed, so a fleet of polls does not become the load it measures.

// jobRecord is one accepted job as its history tells it.
type jobRecord struct {
	sub        submitted
	closed     bool
	status     string // completed, failed, terminated, timed out, canceled, running
	failure    string
	started    time.Time // the workflow's start (server clock)
	placed     time.Time // its first placement; zero if never placed
	ended      time.Time
	placements int
	lostRun    string // why a placed process did not finish, if one did not
	checks     int    // describes so far (the backoff)
}

// tracker follows accepted jobs until they close: each is checked once
// its sleep should have ended, then again with backoff while it runs,
// at a bounded rate of Temporal calls.
type tracker struct {
	tc        client.Client
	namespace string
	rate      float64 // checks per second at most

	mu   sync.Mutex
	due  dueHeap
	recs map[string]*jobRecord
	open int
}

func newTracker(tc client.Client, namespace string, rate float64) *tracker {
	return &tracker{tc: tc, namespace: namespace, rate: rate, recs: map[string]*jobRecord{}}
}

// add follows a newly accepted job; it is first checked when its sleep
// should be over.
func (t *tracker) add(s submitted) {
	r := &jobRecord{sub: s, status: "running"}
	t.mu.Lock()
	t.recs[s.ID] = r
	t.open++
	heap.Push(&t.due, dueJob{at: s.Accepted.Add(s.Spec.Duration + 500*time.Millisecond), rec: r})
	t.mu.Unlock()
}

// run checks due jobs until ctx ends, from a few goroutines sharing one
// pace: a check is one or two round trips, and one at a time would fall
// behind the rate.
func (t *tracker) run(ctx context.Context) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / t.rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if r := t.next(time.Now()); r != nil {
					t.check(ctx, r)
				}
			}
		})
	}
	wg.Wait()
}

// next pops a job whose check is due, if any.
func (t *tracker) next(now time.Time) *jobRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.due.Len() == 0 || t.due[0].at.After(now) {
		return nil
	}
	return heap.Pop(&t.due).(dueJob).rec
}

// check describes one job; a closed one's history is read, a running one
// is checked again later (2 s, doubling to 8 s: waitAll's visibility count
// catches the last ones sooner).
func (t *tracker) check(ctx context.Context, r *jobRecord) {
	t.mu.Lock()
	r.checks++
	checks := r.checks
	t.mu.Unlock()
	desc, err := t.tc.DescribeWorkflowExecution(ctx, r.sub.ID, "")
	if err == nil && desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		err = t.read(ctx, r)
		if err == nil {
			return
		}
	}
	if ctx.Err() != nil {
		return
	}
	wait := time.Duration(1<<min(checks, 3)) * time.Second
	t.mu.Lock()
	heap.Push(&t.due, dueJob{at: time.Now().Add(wait), rec: r})
	t.mu.Unlock()
}

// read fills r from the job's history.
func (t *tracker) read(ctx context.Context, r *jobRecord) error {
	var h jobHistory
	it := t.tc.GetWorkflowHistory(ctx, r.sub.ID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return fmt.Errorf("history of %s: %w", r.sub.ID, err)
		}
		h.add(e)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r.closed, r.status, r.failure = h.closed, h.status, h.failure
	r.started, r.ended, r.lostRun = h.started, h.ended, h.lostRun
	r.placed, r.placements = h.placement()
	if r.closed {
		t.open--
	}
	return nil
}

// recheckAll makes every open job due now: visibility says none runs.
func (t *tracker) recheckAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.due {
		t.due[i].at = time.Time{}
	}
	heap.Init(&t.due)
}

func (t *tracker) remaining() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.open
}

// waitAll waits until every accepted job has closed (true), or timeout
// passes. Every few seconds it asks visibility how many jobs still run:
// at 0 the rest are checked at once instead of at their backoff.
func (t *tracker) waitAll(ctx context.Context, timeout time.Duration, logf func(string, ...any)) bool {
	deadline := time.Now().Add(timeout)
	lastLog := time.Now()
	for i := 0; t.remaining() > 0; i++ {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		if i%3 == 0 {
			if n, err := t.runningJobs(ctx); err == nil && n == 0 {
				t.recheckAll()
			}
		}
		if time.Since(lastLog) > 30*time.Second {
			logf("fleetload: %d jobs still open", t.remaining())
			lastLog = time.Now()
		}
		sleep(ctx, time.Second)
	}
	return true
}

// runningJobs counts Job workflows still running (visibility: it lags
// the executions by a little).
func (t *tracker) runningJobs(ctx context.Context) (int64, error) {
	resp, err := t.tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: t.namespace, Query: "WorkflowType = 'Job' AND ExecutionStatus = 'Running'"})
	if err != nil {
		return 0, err
	}
	return resp.GetCount(), nil
}

// records are every job's record.
func (t *tracker) records() []jobRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]jobRecord, 0, len(t.recs))
	for _, r := range t.recs {
		out = append(out, *r)
	}
	return out
}

type dueJob struct {
	at  time.Time
	rec *jobRecord
}

// dueHeap orders checks by when they are due.
type dueHeap []dueJob

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueJob)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
