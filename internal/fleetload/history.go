package fleetload

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// jobHistory is what one job's history says about its placements and end.
type jobHistory struct {
	scheduled map[int64]string // activity type by scheduled event id
	queues    map[int64]string // and its task queue (a node's, for RunProcess)
	// lostRun is why a placed process did not finish (a timeout, a lost
	// worker): what made the job be placed again.
	lostRun    string
	started    time.Time
	allocated  time.Time // first completed Allocate
	firstRun   time.Time // first RunProcess scheduled
	placements int
	closed     bool
	status     string
	failure    string
	ended      time.Time
}

func (h *jobHistory) add(e *historypb.HistoryEvent) {
	if h.scheduled == nil {
		h.scheduled, h.queues, h.status = map[int64]string{}, map[int64]string{}, "running"
	}
	at := e.GetEventTime().AsTime()
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
		h.started = at
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		a := e.GetActivityTaskScheduledEventAttributes()
		name := a.GetActivityType().GetName()
		h.scheduled[e.GetEventId()], h.queues[e.GetEventId()] = name, a.GetTaskQueue().GetName()
		if name == runActivity && h.firstRun.IsZero() {
			h.firstRun = at
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		if h.scheduled[e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] == allocateActivity {
			h.placements++
			if h.allocated.IsZero() {
				h.allocated = at
			}
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		a := e.GetActivityTaskTimedOutEventAttributes()
		h.runLost(a.GetScheduledEventId(), "timed out: "+failureChain(a.GetFailure()))
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		a := e.GetActivityTaskFailedEventAttributes()
		if msg := failureChain(a.GetFailure()); !strings.Contains(msg, "exited with code") {
			h.runLost(a.GetScheduledEventId(), "failed: "+msg)
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		h.close(at, "completed", "")
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
		h.close(at, "failed", failureChain(e.GetWorkflowExecutionFailedEventAttributes().GetFailure()))
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
		h.close(at, "timed out", "")
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
		h.close(at, "terminated", e.GetWorkflowExecutionTerminatedEventAttributes().GetReason())
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
		h.close(at, "canceled", "")
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		h.close(at, "continued as new", "")
	}
}

// runLost notes the first RunProcess that ended without its process's
// exit.
func (h *jobHistory) runLost(scheduled int64, why string) {
	if h.scheduled[scheduled] == runActivity && h.lostRun == "" {
		h.lostRun = "RunProcess on " + h.queues[scheduled] + " " + why
	}
}

// failureChain is a failure's message and its causes' ("activity error:
// sh exited with code 3: ..."): the top one alone says only where it
// failed.
func failureChain(f *failurepb.Failure) string {
	var parts []string
	for ; f != nil; f = f.GetCause() {
		parts = append(parts, f.GetMessage())
	}
	return strings.Join(parts, ": ")
}

func (h *jobHistory) close(at time.Time, status, failure string) {
	h.closed, h.ended, h.status, h.failure = true, at, status, failure
}

// placement is when the job was first placed and how often: its
// completed Allocates, else (a job workflow placing some other way) its
// first process as one placement.
func (h *jobHistory) placement() (time.Time, int) {
	if h.placements > 0 || h.firstRun.IsZero() {
		return h.allocated, h.placements
	}
	return h.firstRun, 1
}

// clusterHistory sums the cluster workflow's histories, all runs.
type clusterHistory struct {
	from, to time.Time // the measured window
	w        Workflow
	perMin   map[int]int
}

func newClusterHistory(from, to time.Time) *clusterHistory {
	return &clusterHistory{from: from, to: to, perMin: map[int]int{},
		w: Workflow{Signals: map[string]int{}, Updates: map[string]int{}, Activities: map[string]int{}}}
}

// add counts one event of any run.
func (c *clusterHistory) add(e *historypb.HistoryEvent) {
	c.w.Events++
	at := e.GetEventTime().AsTime()
	in := !at.Before(c.from) && !at.After(c.to)
	if in {
		c.w.EventsInWindow++
		c.perMin[int(at.Sub(c.from)/time.Minute)]++
	}
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		name := e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName()
		c.w.Signals[name]++
		if name == HeartbeatSignal {
			c.w.HeartbeatSignals++
			if in {
				c.w.HeartbeatSignalsInWindow++
			}
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
		c.w.Updates[e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName()]++
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		c.w.Activities[e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()]++
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		c.w.ContinuedAsNew++
	}
}

// finish derives the rates: events per minute of the window (its last,
// partial minute left out of the maximum) and heartbeat signals per node
// and minute.
func (c *clusterHistory) finish(nodes int) Workflow {
	w := c.w
	minutes := c.to.Sub(c.from).Minutes()
	w.WindowMinutes = round1(minutes)
	if minutes > 0 {
		w.EventsPerMinute = round1(float64(w.EventsInWindow) / minutes)
		if nodes > 0 {
			w.HeartbeatsPerNodeMinute = float64(int(float64(w.HeartbeatSignalsInWindow)/(float64(nodes)*minutes)*1000)) / 1000
		}
	}
	full := int(minutes)
	for i := range full {
		w.PerMinute = append(w.PerMinute, c.perMin[i])
		w.MaxEventsPerMinute = max(w.MaxEventsPerMinute, c.perMin[i])
	}
	return w
}

// readClusterHistory reads every run of the workflow id, newest first,
// following each run's first event back to the run it continued.
func readClusterHistory(ctx context.Context, tc client.Client, namespace, id string, from, to time.Time, nodes int) (Workflow, error) {
	c := newClusterHistory(from, to)
	runID := ""
	for {
		prev, err := c.readRun(ctx, tc, id, runID)
		if err != nil {
			return c.finish(nodes), err
		}
		c.w.Runs++
		if prev == "" {
			break
		}
		runID = prev
	}
	w := c.finish(nodes)
	w.RunsListed = listRuns(ctx, tc, namespace, id)
	return w, nil
}

// readRun counts one run's events and returns the run it continued ("" if
// it is the first).
func (c *clusterHistory) readRun(ctx context.Context, tc client.Client, id, runID string) (string, error) {
	prev := ""
	it := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return "", fmt.Errorf("history of %s run %q: %w", id, runID, err)
		}
		if a := e.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			prev = a.GetContinuedExecutionRunId()
		}
		c.add(e)
	}
	return prev, nil
}

// listRuns counts the workflow id's runs visibility lists (-1 when it
// cannot be asked): a cross-check of the walk, which misses runs not
// linked by continue-as-new.
func listRuns(ctx context.Context, tc client.Client, namespace, id string) int {
	n := 0
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace, Query: fmt.Sprintf("WorkflowId = '%s'", id), NextPageToken: token})
		if err != nil {
			return -1
		}
		n += len(resp.GetExecutions())
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return n
		}
	}
}
