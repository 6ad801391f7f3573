package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/workspec"
)

// benchFleet is 100 mixed nodes: CPU boxes and 1-, 2- and 8-GPU machines
// across providers.
func benchFleet() []Node {
	provs := []string{"vast", "runpod", "nebius", "vultr", "lab"}
	var nodes []Node
	for i := 0; i < 100; i++ {
		var n Node
		switch i % 4 {
		case 0:
			n = node(fmt.Sprintf("cpu-%d", i), provs[i%5], 64, 256)
		case 1:
			n = node(fmt.Sprintf("g1-%d", i), provs[i%5], 16, 64, 24576)
		case 2:
			n = node(fmt.Sprintf("g2-%d", i), provs[i%5], 32, 128, 49152, 49152)
		default:
			n = node(fmt.Sprintf("g8-%d", i), provs[i%5], 128, 1024, 81920, 81920, 81920, 81920, 81920, 81920, 81920, 81920)
		}
		n.Ephemeral = n.Provider == "vast"
		nodes = append(nodes, n)
	}
	return nodes
}

// benchQueue is 1,000 pending items of mixed shapes: rollouts, fractional
// self-play, training gangs.
func benchQueue(p params.Params, now time.Time) *Queue {
	q := NewQueue(p)
	for i := 0; i < 1000; i++ {
		var w Work
		id := fmt.Sprintf("w%04d", i)
		switch i % 3 {
		case 0:
			w = work(id, workspec.KindRollout, role("rollout_worker", 4, 2, 4, 0))
		case 1:
			w = work(id, workspec.KindSelfPlay, role("selfplay", 2, 1, 2, 0.25))
			w.Spec.Config = "square8_2p"
		default:
			w = grouped(work(id, workspec.KindTraining,
				inGroup(role("trainer", 1, 4, 32, 1), "t"),
				inGroup(role("trajectory_pool", 1, 1, 8, 0), "t"),
				role("data_loader", 1, 1, 4, 0),
			), "t", workspec.StrictPack)
			w.Spec.Config = "hexagonal_2p"
		}
		_ = q.Push(Item{Work: w, Priority: i % 7, Submitted: now.Add(-time.Duration(i) * time.Minute)})
	}
	return q
}

// BenchmarkSchedule1000on100 schedules 1,000 pending items on 100 nodes in
// one round (every item gets a full explanation); ms/round is ns/op in
// milliseconds, the placement time the issue asks for.
func BenchmarkSchedule1000on100(b *testing.B) {
	p := params.Default()
	now := time.Date(2025, 12, 26, 12, 0, 0, 0, time.UTC)
	nodes := benchFleet()
	q := benchQueue(p, now)
	s := New(p)
	b.ReportAllocs()
	var r Round
	for b.Loop() {
		r = s.Schedule(now, nodes, q)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/round")
	b.ReportMetric(float64(len(r.Placed)), "placed")
	b.ReportMetric(float64(len(r.Waiting)), "waiting")
}
