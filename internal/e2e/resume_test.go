package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killRunAgent kill -9s the agent of the node r runs on and returns the
// node's name.
func killRunAgent(t *testing.T, dev *devProc, r runView) string {
	t.Helper()
	killNodeAgent(t, dev, r.Progress.Node)
	return r.Progress.Node
}

// killNodeAgent kill -9s the agent of node in cluster lab.
func killNodeAgent(t *testing.T, dev *devProc, node string) {
	t.Helper()
	var st clusterStatus
	dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st)
	for _, n := range st.Nodes {
		if n.Name == node && n.AgentPID != 0 {
			if err := syscall.Kill(n.AgentPID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no agent pid for node %q: %+v", node, st)
}

// crashableLab starts dev on dir at fixed ports (agents started before a
// kill -9 of dev must find Temporal and S3 again at the same addresses)
// with cluster lab from spec up, its agents' heartbeat timeout 5 s, and
// checks it has nodes nodes. restart starts dev again on the same ports.
func crashableLab(t *testing.T, dir, spec string, nodes int) (dev *devProc, restart func() *devProc) {
	t.Helper()
	ports := []string{"--temporal-port", freePortStr(t), "--api-port", freePortStr(t), "--s3-port", freePortStr(t), "--ui-port", freePortStr(t)}
	dev = startDev(t, dir, ports...)
	if out := cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", spec), "--heartbeat-timeout", "5s"); !strings.Contains(out, fmt.Sprintf("TOTAL (%d nodes", nodes)) {
		t.Fatalf("cluster up: %s", out)
	}
	t.Cleanup(func() { killAgentsOf(dir) })
	return dev, func() *devProc { return startDev(t, dir, ports...) }
}

// trained is the newest iteration a run finished: reported, or live in
// the segment in flight.
func trained(r runView) int64 {
	if r.Live != nil {
		return max(r.Progress.Iteration, r.Live.Iteration)
	}
	return r.Progress.Iteration
}

// TestResumeAfterKillsIsExact is issue "learner" item 4's must-show: a run
// on the built-in CartPole-v1 plugin is killed three times, kill -9 of the
// agent training it in the middle of a segment (twice, at different
// iterations, each time resumed from S3 on another node) and kill -9 of
// `trainyard dev` itself, and its per-iteration metrics are bit for bit
// those of the same spec trained uninterrupted by `run train --local`
// (timing fields aside): the checkpoints hold the envs' own state (every
// CartPole's physics, step count and random stream), so the resumed
// episodes are the ones the run was in.
func TestResumeAfterKillsIsExact(t *testing.T) {
	t.Parallel()
	spec := []string{"--env", "CartPole-v1", "--iterations", "16", "--checkpoint-every", "2", "--seed", "3"}
	start := time.Now()
	straight, stderr, err := runLocalCLI(t, spec...)
	if err != nil || len(straight.Progress.Metrics) != 16 {
		t.Fatalf("uninterrupted run: %v, %d iterations\n%s", err, len(straight.Progress.Metrics), stderr)
	}
	t.Logf("uninterrupted (run train --local): %v", time.Since(start).Round(time.Millisecond))

	// Three nodes: each agent kill takes one away for good.
	dev, restart := crashableLab(t, t.TempDir(), localSpec, 3)
	start = time.Now()
	id := strings.TrimSpace(cli(t, dev, append([]string{"run", "train", "--cluster", "lab", "--detach"}, spec...)...))

	var killed []string
	for _, at := range []int64{3, 8} {
		r := waitRun(t, dev, id, 3*time.Minute, func(r runView) bool { return trained(r) >= at && r.Progress.State == "running" })
		node := killRunAgent(t, dev, r)
		killed = append(killed, node)
		t.Logf("kill -9 of %s's agent after iteration %d (checkpoint %d)", node, trained(r), r.Progress.Checkpoint)
	}
	r := waitRun(t, dev, id, 3*time.Minute, func(r runView) bool { return trained(r) >= 12 })
	dev.kill(syscall.SIGKILL)
	t.Logf("kill -9 of trainyard dev after iteration %d (checkpoint %d)", trained(r), r.Progress.Checkpoint)
	dev = restart()
	r = waitRun(t, dev, id, 3*time.Minute, func(r runView) bool { return r.Status != "running" })
	t.Logf("cluster run with three kills: %v; %d placements, %d lost segments, restores %+v",
		time.Since(start).Round(time.Millisecond), r.Progress.Placements, r.Progress.Failures, r.Progress.Restores)
	if len(r.Progress.Restores) < len(killed) {
		t.Fatalf("run %s restored %d times after %d agent kills: %+v", id, len(r.Progress.Restores), len(killed), r.Progress)
	}
	for _, node := range killed {
		if r.Progress.Node == node {
			t.Fatalf("run %s ended on %s, whose agent was killed", id, node)
		}
	}
	var resumed runDoc
	if err := json.Unmarshal([]byte(cli(t, dev, "run", "show", id, "-o", "json")), &resumed); err != nil {
		t.Fatal(err)
	}
	sameLearning(t, straight, resumed)
	t.Logf("%d iterations, mean return %.2f: identical to the uninterrupted run", len(resumed.Progress.Metrics), resumed.Progress.MeanReturn)
}
