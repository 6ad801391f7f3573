package job

import (
	"context"
	"errors"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/workflows/cluster"
)

// TestPlacementMetrics: decisions land in the duration histogram by
// outcome, and the queue depth counts work refused recently and not placed
// since, forgetting work that stopped asking.
func TestPlacementMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tel := newPlacementTelemetry(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"), func() time.Time { return now })
	ctx := context.Background()
	wait := temporal.NewApplicationError("no node has 2 free GPUs", cluster.ErrNoCapacity)
	never := temporal.NewApplicationError("no node has 9 GPUs", cluster.ErrInfeasible)

	type want struct{ waiting, infeasible int64 }
	steps := []struct {
		name      string
		cluster   string
		job       string
		err       error
		advance   time.Duration
		lab, pool want
	}{
		{"a waits", "lab", "a", wait, 0, want{1, 0}, want{}},
		{"b waits", "lab", "b", wait, 0, want{2, 0}, want{}},
		{"a asks again", "lab", "a", wait, time.Second, want{2, 0}, want{}},
		{"c can never fit", "pool", "c", never, 0, want{2, 0}, want{0, 1}},
		{"a placed", "lab", "a", nil, 0, want{1, 0}, want{0, 1}},
		{"an unrelated failure is not queued", "lab", "d", errors.New("cluster lab: not found"), 0, want{1, 0}, want{0, 1}},
		{"b and c stop asking", "lab", "e", nil, queueWindow + time.Second, want{0, 0}, want{0, 0}},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		tel.observe(ctx, s.cluster, s.job, 3*time.Millisecond, s.err)
		d := tel.depth()
		got := map[string]want{
			"lab":  {d[[2]string{"lab", OutcomeWaiting}], d[[2]string{"lab", OutcomeInfeasible}]},
			"pool": {d[[2]string{"pool", OutcomeWaiting}], d[[2]string{"pool", OutcomeInfeasible}]},
		}
		if got["lab"] != s.lab || got["pool"] != s.pool {
			t.Fatalf("%s: depth lab %+v pool %+v, want %+v %+v", s.name, got["lab"], got["pool"], s.lab, s.pool)
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]uint64{}
	gauges := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case MetricPlacementDuration:
				for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					o, _ := dp.Attributes.Value("outcome")
					outcomes[o.AsString()] += dp.Count
				}
			case MetricQueueDepth:
				gauges = len(m.Data.(metricdata.Gauge[int64]).DataPoints)
			}
		}
	}
	if outcomes[OutcomeWaiting] != 3 || outcomes[OutcomeInfeasible] != 1 || outcomes[OutcomePlaced] != 2 || outcomes[OutcomeError] != 1 {
		t.Errorf("placement decisions by outcome = %v", outcomes)
	}
	if gauges != 4 { // both clusters × both states, zeros included
		t.Errorf("queue depth reported %d series, want 4", gauges)
	}
}
