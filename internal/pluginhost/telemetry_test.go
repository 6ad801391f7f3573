package pluginhost

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/trainyard/trainyard/internal/plugintest"
)

// TestFaultsAreCounted: every call that discards its instance is counted
// in trainyard.plugin.faults by plugin, call and reason; a rejected input
// (the instance lives on) is not.
func TestFaultsAreCounted(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	rt := newTestRuntime(t)
	m := load(t, rt, plugintest.BuildGo(t, "./internal/pluginhost/testdata/hostile"), testLimits)
	ctx := context.Background()
	for _, tc := range []struct {
		seed uint64
		want error
	}{{3, ErrTrap}, {4, ErrGuestFault}, {4, ErrGuestFault}} {
		v, err := m.NewVecEnv(ctx, 4, 0)
		if err != nil {
			t.Fatal(err)
		}
		b := newBatch(v, 1, 1)
		if err := v.Reset(tc.seed, b.obs); err != nil {
			t.Fatal(err)
		}
		if err := b.step(v); !errors.Is(err, tc.want) {
			t.Fatalf("seed %d: step = %v, want %v", tc.seed, err, tc.want)
		}
		v.Close()
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != MetricFaults {
				continue
			}
			for _, dp := range mt.Data.(metricdata.Sum[int64]).DataPoints {
				plugin, _ := dp.Attributes.Value("plugin")
				call, _ := dp.Attributes.Value("call")
				reason, _ := dp.Attributes.Value("reason")
				if plugin.AsString() != m.label {
					t.Errorf("fault counted for plugin %q, want %q", plugin.AsString(), m.label)
				}
				got[call.AsString()+"/"+reason.AsString()] += dp.Value
			}
		}
	}
	want := map[string]int64{"step_batch/trap": 1, "step_batch/guest_fault": 2}
	if len(got) != len(want) || got["step_batch/trap"] != 1 || got["step_batch/guest_fault"] != 2 {
		t.Fatalf("%s = %v, want %v", MetricFaults, got, want)
	}
}
