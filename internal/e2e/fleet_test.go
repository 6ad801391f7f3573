package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/fleetload"
	"github.com/trainyard/trainyard/workflows/cluster"
)

// TestFleetHollowNodes is `make scale`'s scenario, small and for
// correctness only (no wall-clock bounds): 100 hollow nodes (`agent
// --simulate`, two processes: CPU and GPU nodes) join a cluster of static
// nodes, 1,000 short jobs (0-1 s; one-CPU jobs, gangs of 2-8, GPU shares and
// whole GPUs, some exiting non-zero) are submitted, and then every job was
// placed exactly once and ended as its command does, no node flapped (up,
// Dead, up again), nothing holds the cluster (no allocation, an empty
// queue), and the cluster workflow's history (every run) has a few
// heartbeat signals per node, a registration and its changes, not one
// every 5 s (the old design: nodes x minutes x 12).
func TestFleetHollowNodes(t *testing.T) {
	t.Parallel()
	// fleetload cannot import workflows/ (internal/ is below it): its copy
	// of the names must still be the workflow's.
	if fleetload.ClusterWorkflowPrefix+"fleet" != cluster.WorkflowID("fleet") || fleetload.HeartbeatSignal != cluster.SignalHeartbeat {
		t.Fatalf("fleetload's cluster workflow names (%q, %q) differ from workflows/cluster's (%q, %q)",
			fleetload.ClusterWorkflowPrefix+"fleet", fleetload.HeartbeatSignal, cluster.WorkflowID("fleet"), cluster.SignalHeartbeat)
	}
	// At most 64 open at once (a closed loop): an open-loop rate past what
	// it places builds a backlog, which is `make scale`'s to measure, not
	// this test's. 1,000 jobs took 19 s at 120 (0.12 CPU-s a job since the
	// scheduling cycle; 0.4 before it).
	const nodes, jobs = 100, 1000
	dir := t.TempDir()
	// No wall-clock assertion, but a bound: a wedged control plane fails
	// the test in minutes, with what the load saw, not at go test's timeout.
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	res, err := fleetload.Run(ctx, fleetload.Options{
		Nodes: nodes, Jobs: jobs, Rate: 100, Workers: 8, MaxOpen: 64, StatusOnly: true,
		MinDuration: 0, MaxDuration: time.Second,
		DevBinary: binary, AgentBinary: binary, Dir: dir,
		JoinTimeout: 90 * time.Second, DrainTimeout: time.Minute, CheckRate: 200,
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("fleetload: %v\n%s", err, fleetLogs(dir))
	}
	var tbl bytes.Buffer
	fleetload.Table(&tbl, []*fleetload.Result{res})
	t.Logf("fleet of %d hollow nodes, %d jobs:\n%s", nodes, jobs, tbl.String())

	if res.JoinSeconds < 0 {
		t.Errorf("not every node came up")
	}
	if s := res.Submit; s.Accepted != jobs {
		t.Errorf("%d of %d jobs accepted (429: %d, errors %v %q)", s.Accepted, jobs, s.Status429, s.Errors, s.FirstErrors)
	}
	if p := res.Placement; p.PlacedOnce != jobs || p.Ended != jobs || p.Lost != 0 || p.WrongOutcome != 0 {
		t.Errorf("jobs: %d placed once, %d more than once %v, %d never; %d ended, %d lost %v, %d ended otherwise than their command; outcomes %v",
			p.PlacedOnce, p.MultiPlaced, p.MultiPlacedJobs, p.NeverPlaced, p.Ended, p.Lost, p.LostJobs, p.WrongOutcome, p.Outcomes)
	}
	if h := res.Health; h.Flaps != 0 || h.Deaths != 0 {
		t.Errorf("health flapped: %d flaps (%v), %d deaths", h.Flaps, h.FlapNodes, h.Deaths)
	}
	if e := res.End; e.Allocations != 0 || e.Jobs != 0 || e.Queue != 0 || e.CPUsUsed != 0 || e.GPUsUsed != 0 {
		t.Errorf("the cluster still holds work at the end: %+v", e)
	}
	if w := res.Workflow; w.HeartbeatSignals > 3*nodes {
		t.Errorf("%d heartbeat signals in the cluster workflow's history (%d runs) for %d nodes over %.1f min; want at most %d (a registration and changes per node)",
			w.HeartbeatSignals, w.Runs, nodes, w.WindowMinutes, 3*nodes)
	}
	for _, p := range res.Problems {
		t.Errorf("problem: %s", p)
	}
	if t.Failed() {
		t.Log(fleetLogs(dir))
	}
}

// fleetLogs is the end of dev's log and of each agent process's.
func fleetLogs(dir string) string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range logs {
		data, _ := os.ReadFile(f)
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		b.WriteString("--- " + filepath.Base(f) + "\n" + string(data) + "\n")
	}
	return b.String()
}
