package policy

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/workspec"
)

// BenchmarkDecide measures one admission decision on the seed-002 fleet
// with pre-aggregated usage, reporting p50 and p99 latency.
func BenchmarkDecide(b *testing.B) {
	e := loadEngine(b)
	ctx := context.Background()
	fleet := seed002Fleet()
	now := time.Date(2025, 12, 26, 12, 0, 0, 0, time.UTC)
	var records []UsageRecord
	for i := 0; i < 50; i++ {
		records = append(records, UsageRecord{WorkID: fmt.Sprint(i), Config: "hexagonal_4p", Kind: "selfplay", Node: fleet[i%len(fleet)].Name, GPUs: 1, Start: now.Add(-time.Duration(i) * time.Hour), End: now.Add(-time.Duration(i)*time.Hour + 30*time.Minute)})
	}
	in := Input{
		Work: WorkInput("w", workspec.Spec{Kind: workspec.KindTraining, Config: "hexagonal_4p", Roles: []workspec.Role{
			{Name: "trainer", Count: 1, CPUs: 8, GPUs: 1, MemoryMB: 64000},
			{Name: "data_loader", Count: 2, CPUs: 1, MemoryMB: 4000},
		}}, 0),
		Cluster: ClusterInput(fleet),
		Usage:   AggregateUsage(e.Params(), fleet, records, now),
	}
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		if _, err := e.Decide(ctx, in); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
