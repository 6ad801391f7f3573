package job

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/workflows/cluster"
)

// Placement metrics, recorded by the Allocate activity on the control
// worker (the cluster workflow places deterministically and cannot time
// itself):
//
//	trainyard.placement.duration  one placement decision, request to answer
//	                               (cluster, outcome: placed|waiting|infeasible|error)
//	trainyard.queue.depth         work refused a node within the last
//	                               queueWindow and not placed since (cluster,
//	                               state: waiting|infeasible)
//
// Waiting work asks again every few seconds, so a request seen refused
// recently and not placed since is in the queue; one that stopped asking
// (cancelled, failed) drops out after queueWindow.
const (
	MetricPlacementDuration = "trainyard.placement.duration"
	MetricQueueDepth        = "trainyard.queue.depth"
	queueWindow             = 15 * time.Second
)

// Placement outcomes.
const (
	OutcomePlaced     = "placed"
	OutcomeWaiting    = "waiting"
	OutcomeInfeasible = "infeasible"
	OutcomeError      = "error"
)

// outcome classifies an Allocate result.
func outcome(err error) string {
	if err == nil {
		return OutcomePlaced
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		switch app.Type() {
		case cluster.ErrNoCapacity:
			return OutcomeWaiting
		case cluster.ErrInfeasible:
			return OutcomeInfeasible
		}
	}
	return OutcomeError
}

type queueKey struct{ cluster, job string }

type queued struct {
	state string
	seen  time.Time
}

// placementTelemetry keeps the queue the control worker has seen.
type placementTelemetry struct {
	mu       sync.Mutex
	waiting  map[queueKey]queued
	clusters map[string]bool // every cluster seen, so an emptied queue reads 0
	now      func() time.Time
	duration metric.Float64Histogram
}

func newPlacementTelemetry(m metric.Meter, now func() time.Time) *placementTelemetry {
	t := &placementTelemetry{waiting: map[queueKey]queued{}, clusters: map[string]bool{}, now: now}
	t.duration, _ = m.Float64Histogram(MetricPlacementDuration, metric.WithUnit("s"),
		metric.WithDescription("Time to a placement decision for one allocation request, by cluster and outcome."),
		metric.WithExplicitBucketBoundaries(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10))
	_, _ = m.Int64ObservableGauge(MetricQueueDepth, metric.WithUnit("{request}"),
		metric.WithDescription("Work waiting for a node (refused recently, not placed since), by cluster and state."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for k, n := range t.depth() {
				o.Observe(n, metric.WithAttributes(attribute.String("cluster", k[0]), attribute.String("state", k[1])))
			}
			return nil
		}))
	return t
}

// observe records one decision.
func (t *placementTelemetry) observe(ctx context.Context, clusterName, job string, took time.Duration, err error) {
	out := outcome(err)
	t.duration.Record(ctx, took.Seconds(), metric.WithAttributes(attribute.String("cluster", clusterName), attribute.String("outcome", out)))
	k := queueKey{clusterName, job}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clusters[clusterName] = true
	switch out {
	case OutcomeWaiting, OutcomeInfeasible:
		t.waiting[k] = queued{state: out, seen: t.now()}
	case OutcomePlaced:
		delete(t.waiting, k)
	}
}

// depth counts queued requests per (cluster, state), forgetting those not
// seen within queueWindow.
func (t *placementTelemetry) depth() map[[2]string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[[2]string]int64{}
	for c := range t.clusters {
		out[[2]string{c, OutcomeWaiting}], out[[2]string{c, OutcomeInfeasible}] = 0, 0
	}
	now := t.now()
	for k, q := range t.waiting {
		if now.Sub(q.seen) > queueWindow {
			delete(t.waiting, k)
			continue
		}
		out[[2]string{k.cluster, q.state}]++
	}
	return out
}

var placementMetrics = sync.OnceValue(func() *placementTelemetry {
	return newPlacementTelemetry(otel.Meter("github.com/trainyard/trainyard/workflows/job"), time.Now)
})
