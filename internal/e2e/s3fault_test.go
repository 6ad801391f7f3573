package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/trainyard/trainyard/internal/pythontest"
	"github.com/trainyard/trainyard/internal/testhosts"
)

// TestTrainingHostFaults (issue 31): faults on training hosts, sharing
// one dev bound to a test network.
//
// "loss and S3", on a training host of its own: a run with 200 ms of delay
// on what the host sends and 5% packet loss each way completes, the node
// never declared Dead; then S3 unreachable
// from the host for 60 s (its packets dropped both ways, the control plane
// still reachable): the run waits, says why in `run show`, and goes on
// once S3 is back, every iteration recorded once, its newest checkpoint
// whole (no partial one is ever listed).
//
// "rollout worker partitioned": a distributed run's trainer and two
// rollout workers, each on a host of its own; one worker's host cut off
// from the control plane (and so from S3) for longer than the heartbeat
// timeout, then healed. "gang rank partitioned": the same for rank 0 of a
// 2-rank torch.distributed gang, the rank that syncs its checkpoints.
func TestTrainingHostFaults(t *testing.T) {
	t.Parallel()
	n := testhosts.New(t)
	dev := startDev(t, t.TempDir(), "--ip", n.Gateway.String())
	keys := devS3Keys(t, dev)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// up brings up cluster name, one static node of 1 CPU per host, each
	// host's agent started as deploy/systemd's unit starts it.
	up := func(t *testing.T, name string, hosts []*testhosts.Host, flags ...string) {
		t.Helper()
		var nodes []string
		for _, h := range hosts {
			nodes = append(nodes, h.Name)
		}
		spec := fmt.Sprintf("name: %s\ndefaults: {provisioner: {kind: static}, resources: {cpus: 1}}\nnodes: [{name: %s}]\n", name, strings.Join(nodes, "}, {name: "))
		cli(t, dev, append([]string{"cluster", "up", "-f", writeFile(t, name+".yaml", spec), "--wait=false"}, flags...)...)
		token := strings.TrimSpace(cli(t, dev, "cluster", "join-token", name))
		for _, h := range hosts {
			env := labAgentEnv(dev, h.Name, token, keys)
			env["TRAINYARD_CLUSTER"] = name
			env["TRAINYARD_METRICS_LISTEN"] = h.Addr.String() + ":9464"
			startSystemdAgent(ctx, t, h, env)
		}
		for _, h := range hosts {
			waitNodeIdleAt(t, dev, name, h.Name, h)
		}
	}
	lab := []*testhosts.Host{n.Host("nickel")}
	spread := []*testhosts.Host{n.Host("cobalt"), n.Host("copper"), n.Host("tin")}
	up(t, "lab", lab)
	up(t, "spread", spread, "--heartbeat-timeout", "10s") // at 6 s, make test's load has declared starved nodes Dead
	t.Run("loss and S3", func(t *testing.T) {
		lossAndUnreachableS3(t, dev, lab[0])
	})
	t.Run("rollout worker partitioned", func(t *testing.T) {
		rolloutWorkerPartitioned(t, n, dev, spread)
	})
	t.Run("gang rank partitioned", func(t *testing.T) {
		pythontest.Require(t, "TRAINYARD_REQUIRE_TORCH", "python-torch", "torch.distributed")
		for _, h := range spread {
			waitNodeIdleAt(t, dev, "spread", h.Name, h)
		}
		gangRankPartitioned(t, n, dev, spread)
	})
}

func lossAndUnreachableS3(t *testing.T, dev *devProc, h *testhosts.Host) {
	u, err := url.Parse(dev.ep.S3)
	if err != nil {
		t.Fatal(err)
	}
	s3, err := netip.ParseAddrPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}

	// 200 ms delay and 5% loss each way on the host's link for a whole run:
	// it completes, and the node never flaps to Dead (heartbeats every 2 s,
	// Dead after the default 15 s of silence).
	h.Delay(200 * time.Millisecond)
	h.Loss(5)
	start := time.Now()
	lossy := strings.TrimSpace(cli(t, dev, "run", "train", "--cluster", "lab", "--detach", "--env", "CartPole-v1",
		"--iterations", "8", "--checkpoint-every", "2", "--seed", "4"))
	healths := map[string]int{}
	r := waitRun(t, dev, lossy, 4*time.Minute, func(r runView) bool {
		var st clusterStatus
		dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st)
		for _, nd := range st.Nodes {
			healths[nd.Health]++
		}
		return r.Status != "running"
	})
	h.Heal()
	if r.Status != "completed" || healths["Dead"] > 0 {
		t.Fatalf("run %s at 200 ms and 5%% loss: %s/%s (%s); node health seen %v", lossy, r.Status, r.Progress.State, r.Error, healths)
	}
	assertEveryIteration(t, r)
	t.Logf("200 ms delay and 5%% loss on %s for a whole run: completed in %v, %d lost segments, node health polled %v (never Dead)",
		h.Name, time.Since(start).Round(time.Second), r.Progress.Failures, healths)

	id := strings.TrimSpace(cli(t, dev, "run", "train", "--cluster", "lab", "--detach", "--env", "CartPole-v1",
		"--iterations", "20", "--checkpoint-every", "2", "--seed", "3"))
	waitRun(t, dev, id, 3*time.Minute, func(r runView) bool { return trained(r) >= 4 && r.Progress.State == "running" })
	h.PartitionFromService(s3)
	cut := time.Now()
	said, shown := "", ""
	for time.Since(cut) < 60*time.Second {
		var r struct {
			Waiting string `json:"waiting"`
		}
		dev.call("GET", "/v1/runs/"+id, dev.admin, nil, &r)
		if said == "" && r.Waiting != "" {
			said = fmt.Sprintf("after %v: %s", time.Since(cut).Round(time.Second), r.Waiting)
			shown = cli(t, dev, "run", "show", id)
		}
		time.Sleep(time.Second)
	}
	h.Heal()
	healed := time.Now()
	if !strings.Contains(said, "S3 has not answered") || !strings.Contains(shown, "waiting on") {
		t.Errorf("the run never said it waits on S3 in 60 s without it (waiting %q); run show:\n%s", said, shown)
	}
	t.Logf("without S3, the run said %s", said)
	r = waitRun(t, dev, id, 4*time.Minute, func(r runView) bool { return r.Status != "running" })
	if r.Status != "completed" || (r.Progress.State != "succeeded" && r.Progress.State != "completed") {
		t.Fatalf("run %s after S3 came back: %s/%s: %s %s", id, r.Status, r.Progress.State, r.Error, r.Progress.Reason)
	}
	assertEveryIteration(t, r) // none lost, none twice
	// The newest checkpoint is whole: it downloads, every chunk's checksum good.
	cli(t, dev, "run", "download", id, "latest", "-d", t.TempDir())
	t.Logf("S3 unreachable from %s for 60 s: run %s finished %v after the heal; lost segments %d, iterations lost 0, duplicated 0",
		h.Name, id, time.Since(healed).Round(time.Second), r.Progress.Failures)
}

// rolloutWorkerPartitioned: a distributed CartPole run, its trainer and two
// rollout workers spread one to a host (half a CPU each, so a replacement
// fits beside another); one worker's host is cut off from the control
// plane, and so from S3, until the worker has been placed again, then
// healed. The cut-off worker cannot write while cut off; once healed its
// Temporal heartbeat is refused and it stops. Whatever it writes late is a
// fragment for the slot it held: taken only if acted with exactly the
// weights the trainer awaits, one per slot per iteration, never twice.
func rolloutWorkerPartitioned(t *testing.T, n *testhosts.Net, dev *devProc, hosts []*testhosts.Host) {
	id := strings.TrimSpace(cli(t, dev, "run", "train", "--cluster", "spread", "--detach", "--env", "CartPole-v1",
		"--iterations", "40", "--checkpoint-every", "5", "--seed", "2", "--rollout-workers", "2", "--envs-per-worker", "4",
		"--cpus", "0.5", "--rollout-cpus", "0.5"))
	get := func() distView {
		var v distView
		if code, _, raw := dev.call("GET", "/v1/runs/"+id, dev.admin, nil, &v); code != 200 {
			t.Fatalf("get run: %d %s", code, raw)
		}
		return v
	}
	byName := map[string]*testhosts.Host{}
	for _, h := range hosts {
		byName[h.Name] = h
	}
	var v distView
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		v = get()
		if v.Status != "running" || time.Now().After(deadline) {
			t.Fatalf("run %s: no distributed iterations on three hosts: %s %+v", id, v.Status, v.Progress)
		}
		ws := v.Progress.RolloutWorkers
		if len(v.Progress.Metrics) >= 3 && len(ws) == 2 && ws[0].State == "running" && ws[1].State == "running" {
			break
		}
	}
	// The worker to cut off: one on a host of its own.
	ws := v.Progress.RolloutWorkers
	w := ws[1]
	if w.Node == v.Progress.Node {
		w = ws[0]
	}
	cutHost := byName[w.Node]
	if cutHost == nil || w.Node == v.Progress.Node || ws[0].Node == ws[1].Node {
		t.Fatalf("trainer on %s, workers %+v: want a worker on a host of its own", v.Progress.Node, ws)
	}
	cutAt := len(v.Progress.Metrics)
	cut := time.Now()
	cutHost.PartitionFrom(n.Gateway)
	why := ""
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		v = get()
		rw := v.Progress.RolloutWorkers[w.Worker]
		if why == "" {
			why = rw.Reason
		}
		if rw.Placements > w.Placements && rw.State == "running" {
			break
		}
		if v.Status != "running" || time.Now().After(deadline) {
			t.Fatalf("run %s: worker %d not placed again after %s was cut off: %s %+v", id, w.Worker, w.Node, v.Status, v.Progress.RolloutWorkers)
		}
	}
	moved := time.Since(cut)
	replaced := v.Progress.RolloutWorkers[w.Worker]
	movedAt := len(v.Progress.Metrics)
	cutHost.Heal()
	for deadline := time.Now().Add(3 * time.Minute); v.Status == "running"; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run %s not done 3m after the heal: %+v", id, v.Progress)
		}
		v = get()
	}
	r := getRun(t, dev, id)
	if r.Status != "completed" || v.Progress.Failures != 0 {
		t.Fatalf("run %s after the partition: %s/%s (%s), trainer segments lost %d", id, r.Status, r.Progress.State, r.Error, v.Progress.Failures)
	}
	assertEveryIteration(t, r)
	// Each iteration learnt from exactly one fragment per slot, acted with
	// the weights before it; late ones from the cut-off host are counted.
	late := 0
	for _, m := range v.Progress.Metrics {
		if len(m.Rollouts) != 2 || m.Rollouts[0].Worker != 0 || m.Rollouts[1].Worker != 1 ||
			m.Rollouts[0].WeightVersion != m.Iteration-1 || m.Rollouts[1].WeightVersion != m.Iteration-1 {
			t.Fatalf("iteration %d learnt from %+v", m.Iteration, m.Rollouts)
		}
		if int(m.Iteration) > movedAt && m.Rollouts[w.Worker].Node == w.Node {
			late++
		}
	}
	t.Logf("rollout worker %d's host %s cut off at iteration %d: placed again on %s %v later (%s); healed; run completed: %d iterations, lost 0, recorded twice 0, trainer segments lost 0, fragments from the cut-off placement taken after its replacement %d",
		w.Worker, w.Node, cutAt, replaced.Node, moved.Round(time.Second), why, len(v.Progress.Metrics), late)
}

// gangRankPartitioned: a 2-rank gloo gang (allReduce, 160 steps), rank 0's
// host cut off from the control plane and S3 after a few synced steps.
// Rank 1 still reaches rank 0 host to host, so the cut-off gang trains on
// until rank 0's heartbeat times out; then the gang stops and is placed
// again off that node, restored from the newest checkpoint synced before
// the cut. Healed, the cut-off agent's late sync of rank 0's newer steps
// is refused by the fence (its agent's stale_refused counter): the run's
// newest checkpoint is only ever the new gang's.
func gangRankPartitioned(t *testing.T, n *testhosts.Net, dev *devProc, hosts []*testhosts.Host) {
	// 40 s of steps: the cut-off gang must still be at it when rank 0's
	// heartbeat times out (22 s after the cut here).
	script := strings.NewReplacer("range(start, 40)", "range(start, 160)", "time.sleep(0.5)", "time.sleep(0.25)").Replace(allReduce)
	id := strings.TrimSpace(cli(t, dev, "run", "train", "--cluster", "spread", "--nodes", "2", "--cpus", "0.5", "--sync-every", "1", "--detach", "--", pythontest.Python, "-c", script))
	byName := map[string]*testhosts.Host{}
	for _, h := range hosts {
		byName[h.Name] = h
	}
	var live struct {
		Progress struct {
			Ranks []string `json:"ranks"`
		} `json:"progress"`
	}
	ranks := func() []string {
		live.Progress.Ranks = nil
		dev.call("GET", "/v1/runs/"+id, dev.admin, nil, &live)
		return live.Progress.Ranks
	}
	waitRun(t, dev, id, 3*time.Minute, func(runView) bool { return len(ranks()) == 2 && syncedCheckpoints(t, dev, id) >= 4 })
	first := ranks()
	cutHost := byName[first[0]]
	if cutHost == nil || first[0] == first[1] {
		t.Fatalf("ranks on %v: want two test hosts", first)
	}
	cut := time.Now()
	cutHost.PartitionFrom(n.Gateway)
	// What the run holds at the cut: rank 0 can sync no more.
	ckpt := t.TempDir()
	cli(t, dev, "run", "download", id, "latest", "-d", ckpt)
	b, err := os.ReadFile(filepath.Join(ckpt, "step"))
	if err != nil {
		t.Fatalf("the newest checkpoint at the cut: %v", err)
	}
	syncedAtCut, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	waitRun(t, dev, id, 3*time.Minute, func(runView) bool {
		rs := ranks()
		return len(rs) == 2 && rs[0] != first[0] && rs[1] != first[0]
	})
	moved := time.Since(cut)
	cutHost.Heal()
	r := waitRun(t, dev, id, 4*time.Minute, func(r runView) bool { return r.Status != "running" })
	if r.Progress.State != "succeeded" || r.Progress.Failures < 1 {
		t.Fatalf("gang %s after rank 0's host was cut off: %s/%s (%s), %d failures", id, r.Status, r.Progress.State, r.Error, r.Progress.Failures)
	}
	logs := cli(t, dev, "run", "logs", id, "--rank", "0")
	ends := regexp.MustCompile(`rank 0 of 2 done: sum 3, from step ([0-9]+)`).FindAllStringSubmatch(logs, -1)
	if ends == nil {
		t.Fatalf("rank 0's log: no end of the restarted gang:\n%s", logs)
	}
	done := ends[len(ends)-1]
	from, _ := strconv.ParseInt(done[1], 10, 64)
	if from < syncedAtCut {
		t.Errorf("the restarted gang went on from step %d; step %d had been synced before the cut: steps lost", from, syncedAtCut)
	}
	// Once healed, the cut-off agent's late writes meet the fence.
	var refused float64
	waitFor(t, func() bool {
		m, err := scrape("http://" + cutHost.Addr.String() + ":9464/metrics")
		refused = m["trainyard_checkpoint_stale_refused_total"]
		return err == nil
	})
	t.Logf("gang rank 0's host %s cut off (step %d synced): the gang placed again on %v %v later; healed; finished from step %s, lost 0; late writes of the cut-off rank refused: %g",
		cutHost.Name, syncedAtCut, ranks(), moved.Round(time.Second), done[1], refused)
}

// scrape sums a Prometheus text page's samples by metric name.
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			out[name] += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return out, nil
}
