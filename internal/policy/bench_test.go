package policy

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/ledger"
	"github.com/trainyard/trainyard/internal/scheduler"
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
//	live-usage       as the control plane decides: each decision's usage is
//	                 the ledger (1,000 entries, 40 running) summed at that
//	                 decision's time, so the usage document is new every
//	                 time (ledger/quota-sum times the sum on its own)
//
// fleet-changed changes one node's used resources each time, as placements
// starting and ending do: the Wasm VM patches them into its cached cluster
// document rather than parsing it whole.
//
// Last, machine/loop times a loop of arithmetic alone (no memory, no
// allocation, no Wasm) made as long as wasm/fleet-unchanged's p50 in the
// same run: its p99 is the machine's own tail for work that long.
func BenchmarkDecide(b *testing.B) {
	e, preserving := loadEngine(b), loadPreservingEngine(b)
	ctx := context.Background()
	var decisionP50 time.Duration // wasm/fleet-unchanged's, for machine/loop
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
		{"wasm", "live-usage"}, {"topdown", "live-usage"},
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
			book := liveLedger(fleet, now)
			for b.Loop() {
				in := Input{Work: WorkInput(fmt.Sprint("w", i), specs[i%len(specs)], int64(i%20000)), Cluster: cluster, Usage: usage}
				if mode == "live-usage" {
					// As the control plane decides: the ledger summed at
					// this decision's time (every decision sees new totals;
					// ledger/quota-sum times the sum itself).
					in.Usage = UsageFromLedger(e.Params(), fleet, book.Quota(e.Params(), now.Add(time.Duration(i)*time.Second)))
				}
				t0 := time.Now()
				if mode == "fleet-changed" {
					// A fresh slice, as a caller re-reading the fleet would pass.
					in.Cluster.Nodes = slices.Clone(cluster.Nodes)
					in.Cluster.Nodes[i%len(fleet)].Used.CPUs = float64(i % 8)
				}
				i++
				if _, err := e.decide(ctx, in, useWasm); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			p50 := reportPercentiles(b, lat)
			if run.evaluator == "wasm" && mode == "fleet-unchanged" {
				decisionP50 = p50
			}
		})
	}
	b.Run("ledger/quota-sum", func(b *testing.B) {
		book, p := liveLedger(fleet, now), e.Params()
		lat := make([]time.Duration, 0, 1<<16)
		i := 0
		for b.Loop() {
			t0 := time.Now()
			_ = UsageFromLedger(p, fleet, book.Quota(p, now.Add(time.Duration(i)*time.Second)))
			lat = append(lat, time.Since(t0))
			i++
		}
		reportPercentiles(b, lat)
	})
	b.Run("machine/loop", func(b *testing.B) {
		if decisionP50 == 0 {
			b.Skip("wasm/fleet-unchanged did not run")
		}
		n := loopLength(decisionP50)
		lat := make([]time.Duration, 0, 1<<16)
		for b.Loop() {
			t0 := time.Now()
			loopSink += spin(n)
			lat = append(lat, time.Since(t0))
		}
		reportPercentiles(b, lat)
	})
}

// liveLedger is a day of a fleet's ledger (about a quarter of its GPU
// time, configs near their quotas): 1,000 entries over six
// configs and four kinds, the last 40 still running.
func liveLedger(fleet []scheduler.Node, now time.Time) *ledger.Book {
	configs := []string{"hexagonal_4p", "hexagonal_2p", "square19_2p", "square8_2p", "hex8_2p", "square19_4p"}
	kinds := []string{workspec.KindTraining, workspec.KindSelfPlay, workspec.KindEvaluation, workspec.KindRollout}
	var b ledger.Book
	for i := range 1000 {
		n := fleet[i%len(fleet)]
		e := ledger.Entry{WorkID: fmt.Sprint("l", i), Config: configs[i%len(configs)], Kind: kinds[i%len(kinds)], Node: n.Name, Provider: n.Provider,
			NodeVRAMMB: n.Capacity.TotalVRAMMB(), GPUs: float64(1 + i%2), Start: now.Add(-time.Duration(1000-i) * 86 * time.Second)}
		if i < 960 {
			e.End = e.Start.Add(15 * time.Minute)
		}
		b.Open(e)
	}
	return &b
}

// reportPercentiles reports p10, p50 and p99 of lat and returns the p50.
func reportPercentiles(b *testing.B, lat []time.Duration) time.Duration {
	slices.Sort(lat)
	for _, p := range []struct {
		unit string
		at   int
	}{{"p10-µs", len(lat) / 10}, {"p50-µs", len(lat) / 2}, {"p99-µs", len(lat) * 99 / 100}} {
		b.ReportMetric(float64(lat[p.at].Nanoseconds())/1e3, p.unit)
	}
	return lat[len(lat)/2]
}

var loopSink uint64

// spin is n steps of a linear congruential generator: arithmetic only.
func spin(n int) uint64 {
	x := uint64(1)
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// loopLength is the spin length that takes d, from the fastest of a few
// timed runs.
func loopLength(d time.Duration) int {
	const probe = 100_000
	best := time.Duration(math.MaxInt64)
	for range 20 {
		t0 := time.Now()
		loopSink += spin(probe)
		best = min(best, time.Since(t0))
	}
	return int(float64(probe) * float64(d) / float64(best))
}
