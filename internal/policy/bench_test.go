package policy

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/workspec"
)

// BenchmarkDecide measures admission decisions on the seed-002 fleet (18
// GPU nodes, 33 GPUs) with usage pre-aggregated from 50 raw records, for a
// mix of submissions (training, fractional self-play, evaluation, CPU-only
// rollout; a new work ID and wait each time, so no two inputs repeat). It
// reports the p50 and p99 of individual decisions, GC pauses included (and
// the p10: on a shared machine the gap between p10 and p99 is mostly the
// machine's jitter), for each evaluator side by side:
//
//	wasm     the bundle compiled to Wasm by OPA, run in wazero (what
//	         Decide uses)
//	topdown  OPA's interpreter on the same bundle and inputs
//
// and two fleet states:
//
//	fleet-unchanged  the fleet and usage stay the same between decisions
//	                 (a burst of submissions): their documents are reused
//	fleet-changed    every decision sees a fleet whose usage changed, so
//	                 the cluster document is rebuilt (and, for wasm,
//	                 parsed into the module) each time
//	gpu-preservation fleet unchanged, with seed 000's GPU preservation on
//	                 (one GPU per node reserved for inference): the policy
//	                 works out the unreserved GPUs each decision, and the
//	                 self-play submission is denied (self-play is CPU-only)
func BenchmarkDecide(b *testing.B) {
	e, preserving := loadEngine(b), loadPreservingEngine(b)
	ctx := context.Background()
	fleet := seed002Fleet()
	now := time.Date(2025, 12, 26, 12, 0, 0, 0, time.UTC)
	var records []UsageRecord
	for i := 0; i < 50; i++ {
		records = append(records, UsageRecord{WorkID: fmt.Sprint(i), Config: "hexagonal_4p", Kind: "selfplay", Node: fleet[i%len(fleet)].Name, GPUs: 1, Start: now.Add(-time.Duration(i) * time.Hour), End: now.Add(-time.Duration(i)*time.Hour + 30*time.Minute)})
	}
	usage := AggregateUsage(e.Params(), fleet, records, now)
	specs := []workspec.Spec{
		{Kind: workspec.KindTraining, Config: "hexagonal_4p", Roles: []workspec.Role{
			{Name: "trainer", Count: 1, CPUs: 8, GPUs: 1, MemoryMB: 64000},
			{Name: "data_loader", Count: 2, CPUs: 1, MemoryMB: 4000},
		}},
		{Kind: workspec.KindSelfPlay, Config: "square19_2p", Roles: []workspec.Role{{Name: "selfplay", Count: 8, CPUs: 2, GPUs: 0.25, MemoryMB: 8000}}},
		{Kind: workspec.KindEvaluation, Config: "hex8_2p", Roles: []workspec.Role{{Name: "evaluator", Count: 2, CPUs: 2, GPUs: 0.5, MemoryMB: 8000}}},
		{Kind: workspec.KindRollout, Config: "square8_2p", Roles: []workspec.Role{{Name: "rollout_worker", Count: 7, CPUs: 6, MemoryMB: 24000}}},
	}
	for _, run := range []struct {
		evaluator string
		mode      string
	}{
		{"wasm", "fleet-unchanged"}, {"topdown", "fleet-unchanged"},
		{"wasm", "fleet-changed"}, {"topdown", "fleet-changed"},
		{"wasm", "gpu-preservation"}, {"topdown", "gpu-preservation"},
	} {
		mode, useWasm := run.mode, run.evaluator == "wasm"
		e := e
		if mode == "gpu-preservation" {
			e = preserving
		}
		b.Run(run.evaluator+"/"+mode, func(b *testing.B) {
			cluster := ClusterInput(fleet)
			lat := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				in := Input{Work: WorkInput(fmt.Sprint("w", i), specs[i%len(specs)], int64(i%20000)), Cluster: cluster, Usage: usage}
				if mode == "fleet-changed" {
					// A fresh slice, as a caller re-reading the fleet would pass.
					in.Cluster.Nodes = slices.Clone(cluster.Nodes)
					in.Cluster.Nodes[i%len(fleet)].Used.CPUs = float64(i % 8)
				}
				i++
				t0 := time.Now()
				if _, err := e.decide(ctx, in, useWasm); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/10].Nanoseconds())/1e3, "p10-µs")
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
		})
	}
}
