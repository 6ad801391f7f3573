package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/plugintest"
)

// threeNodeSpec: three CPU-only local agents: the trainer and two rollout
// workers each get a node, and a worker whose node dies has somewhere to go.
const threeNodeSpec = `
name: lab
defaults:
  provider: local
  provisioner: {kind: local}
nodes:
  - {name: node-a}
  - {name: node-b}
  - {name: node-c}
`

type distView struct {
	Status   string `json:"status"`
	Progress struct {
		State          string `json:"state"`
		Node           string `json:"node"`
		Failures       int    `json:"failures"`
		RolloutWorkers []struct {
			Worker     int    `json:"worker"`
			State      string `json:"state"`
			Node       string `json:"node"`
			Reason     string `json:"reason"`
			Placements int    `json:"placements"`
			Failures   int    `json:"failures"`
		} `json:"rollout_workers"`
		Metrics []struct {
			Iteration int64 `json:"iteration"`
			Rollouts  []struct {
				Worker        int    `json:"worker"`
				Node          string `json:"node"`
				WeightVersion int64  `json:"weight_version"`
			} `json:"rollouts"`
		} `json:"metrics"`
	} `json:"progress"`
}

// TestTrainDistributedRolloutsSurviveWorkerKill is the distributed mode on
// the real binary (real Temporal, real embedded S3): CartPole PPO with
// rollout_workers: 2 on a three-node cluster reaches its target with every
// iteration learnt from both workers' fragments (each acted with the
// weights of the iteration before); kill -9 of a rollout worker's agent
// mid-run → the worker is placed again on a live node and the run
// completes with no iteration lost and no trainer segment lost. Each role
// reserves half a CPU: a local node offers 1.8, so the replacement fits
// beside the trainer or the other worker.
//
// The target is 200, not 475: where the kill falls changes what the
// workers play, so this is a different CartPole run each time, and the
// run's own criterion (the last 100 training episodes ≥ 475) is reached by
// the distributed learner on some seeds only before the learning rate has
// annealed to 0 at 100k steps (2 workers × 4 envs, simulated: seed 1 at
// 53k steps, seeds 2 and 3 stuck at 327 and 455; docs/training.md). It
// failed that way in CI once (best 410.8). 200 is reached on every seed
// well before the anneal, and the kill still falls mid-run.
func TestTrainDistributedRolloutsSurviveWorkerKill(t *testing.T) {
	t.Parallel()
	wasm := plugintest.BuildGo(t, "./plugins/cartpole")
	dir := t.TempDir()
	dev := startDev(t, dir)
	out := cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", threeNodeSpec), "--heartbeat-timeout", "5s")
	if !strings.Contains(out, "TOTAL (3 nodes") {
		t.Fatalf("cluster up: %s", out)
	}
	t.Cleanup(func() { killAgentsOf(dir) })
	var rec struct {
		ID string `json:"id"`
	}
	if code, raw := upload(t, dev, dev.admin, wasm, &rec); code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, raw)
	}
	var ref struct {
		ID string `json:"id"`
	}
	code, _, raw := dev.call("POST", "/v1/runs", dev.admin,
		`{"cluster":"lab","env":"CartPole-v1","target_return":200,"iterations":400,"checkpoint_every":5,"seed":1,"rollout_workers":2,"envs_per_worker":4,"cpus":0.5,"rollout_cpus":0.5}`, &ref)
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, raw)
	}
	id := ref.ID
	start := time.Now()
	get := func() distView {
		var v distView
		if code, _, raw := dev.call("GET", "/v1/runs/"+id, dev.admin, nil, &v); code != 200 {
			t.Fatalf("get run: %d %s", code, raw)
		}
		return v
	}

	// Mid-run: both workers running on nodes of their own.
	var v distView
	deadline := time.Now().Add(3 * time.Minute)
	for {
		v = get()
		if v.Status != "running" {
			t.Fatalf("run ended before the kill: %+v", v)
		}
		if len(v.Progress.Metrics) >= 3 && len(v.Progress.RolloutWorkers) == 2 &&
			v.Progress.RolloutWorkers[0].State == "running" && v.Progress.RolloutWorkers[1].State == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no distributed iterations after 3m: %+v", v.Progress)
		}
		time.Sleep(100 * time.Millisecond)
	}
	victimWorker := -1
	for _, w := range v.Progress.RolloutWorkers {
		if w.Node != v.Progress.Node {
			victimWorker = w.Worker
		}
	}
	if victimWorker < 0 {
		t.Fatalf("every rollout worker shares the trainer's node %s: %+v", v.Progress.Node, v.Progress.RolloutWorkers)
	}
	victim := v.Progress.RolloutWorkers[victimWorker].Node
	var st clusterStatus
	dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st)
	pid := 0
	for _, n := range st.Nodes {
		if n.Name == victim {
			pid = n.AgentPID
		}
	}
	if pid == 0 {
		t.Fatalf("no agent pid for %s", victim)
	}
	killedAt := len(v.Progress.Metrics)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s (rollout worker %d) at iteration %d, %v into the run", victim, victimWorker, killedAt, time.Since(start).Round(time.Millisecond))

	for deadline := time.Now().Add(5 * time.Minute); get().Status == "running"; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			v = get()
			t.Fatalf("run not done 5m after the kill: trainer on %s, iterations %d, workers %+v\nlog:\n%s", v.Progress.Node, len(v.Progress.Metrics), v.Progress.RolloutWorkers, dev.log())
		}
	}
	r := getRun(t, dev, id)
	assertReached(t, r, 200)
	v = get()
	w := v.Progress.RolloutWorkers[victimWorker]
	if w.Failures < 1 || w.Placements < 2 || v.Progress.Failures != 0 {
		t.Fatalf("after killing %s: worker %+v, trainer failures %d", victim, w, v.Progress.Failures)
	}
	for _, m := range v.Progress.Metrics {
		if len(m.Rollouts) != 2 || m.Rollouts[0].WeightVersion != m.Iteration-1 || m.Rollouts[1].WeightVersion != m.Iteration-1 {
			t.Fatalf("iteration %d learnt from %+v", m.Iteration, m.Rollouts)
		}
	}
	last := v.Progress.Metrics[len(v.Progress.Metrics)-1]
	if last.Rollouts[victimWorker].Node == victim {
		t.Fatalf("the last fragments of worker %d still come from the dead node %s", victimWorker, victim)
	}
	if out := cli(t, dev, "run", "show", id); !strings.Contains(out, "rollout worker 1") || !strings.Contains(out, "last rollouts") {
		t.Fatalf("run show: %s", out)
	}
	t.Logf("distributed run %s: %d iterations, %v wall; worker %d placements %d (%s)", id, len(v.Progress.Metrics),
		time.Since(start).Round(time.Millisecond), victimWorker, w.Placements, fmt.Sprint(w.Reason))
}

// gangSpec: two CPU nodes of 2 CPUs each.
const gangSpec = `
name: gang
defaults:
  provider: local
  provisioner: {kind: local}
nodes:
  - {name: node-a, resources: {cpus: 2}}
  - {name: node-b, resources: {cpus: 2}}
`

// TestDistributedRunIsOneGang: a distributed run's trainer and rollout
// workers are placed all or nothing. With a job holding most of node-a,
// the trainer (0.5 CPU) and one worker (1 CPU) would fit on node-b but
// the second worker would not: the run waits whole, holding nothing, its
// workers listed as waiting with the gang's reason. Once the job ends the
// three are placed together, spread over both nodes.
func TestDistributedRunIsOneGang(t *testing.T) {
	t.Parallel()
	wasm := plugintest.BuildGo(t, "./plugins/cartpole")
	dev := placementDev(t, "gang", gangSpec)
	if code, raw := upload(t, dev, dev.admin, wasm, nil); code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, raw)
	}
	g := gate{t.TempDir()}
	blocker := oneRole("gang", "job", "", 0, g.cmd("stop-blocker"))
	blocker["roles"].([]any)[0].(map[string]any)["cpus"] = 1.6
	job := workJob(t, dev, blocker)
	waitJob(t, dev, job, "running", running)

	var ref struct {
		ID string `json:"id"`
	}
	code, _, raw := dev.call("POST", "/v1/runs", dev.admin,
		`{"cluster":"gang","env":"CartPole-v1","iterations":100000,"seed":1,"rollout_workers":2,"envs_per_worker":2,"cpus":0.5,"rollout_cpus":1}`, &ref)
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, raw)
	}
	get := func() distView {
		var v distView
		if code, _, raw := dev.call("GET", "/v1/runs/"+ref.ID, dev.admin, nil, &v); code != 200 {
			t.Fatalf("get run: %d %s", code, raw)
		}
		return v
	}
	var v distView
	waitFor(t, func() bool {
		v = get()
		return v.Progress.State == "waiting" && len(v.Progress.RolloutWorkers) == 2
	})
	// Still whole after several placement attempts (one every 2 s).
	time.Sleep(5 * time.Second)
	v = get()
	var st clusterStatus
	dev.call("GET", "/v1/clusters/gang", dev.admin, nil, &st)
	for _, n := range st.Nodes {
		for _, j := range n.Jobs {
			if strings.HasPrefix(j, ref.ID) {
				t.Fatalf("the waiting run holds part of the cluster (%s on %s): %+v", j, n.Name, v.Progress)
			}
		}
	}
	if v.Progress.State != "waiting" || v.Progress.Node != "" {
		t.Fatalf("run placed in part: %+v", v.Progress)
	}
	for _, w := range v.Progress.RolloutWorkers {
		if w.State != "waiting" || !strings.Contains(w.Reason, "one gang") || w.Placements != 0 {
			t.Fatalf("worker %d while the gang waits: %+v", w.Worker, w)
		}
	}

	g.open(t, "stop-blocker")
	waitFor(t, func() bool {
		v = get()
		return v.Progress.State == "running" && v.Progress.RolloutWorkers[0].State == "running" && v.Progress.RolloutWorkers[1].State == "running"
	})
	nodes := map[string]bool{v.Progress.Node: true}
	for _, w := range v.Progress.RolloutWorkers {
		nodes[w.Node] = true
		if w.Placements != 1 {
			t.Fatalf("worker %d: %+v", w.Worker, w)
		}
	}
	if len(nodes) != 2 {
		t.Fatalf("trainer on %s, workers %+v: want the gang spread over both nodes", v.Progress.Node, v.Progress.RolloutWorkers)
	}
	if code, _, raw := dev.call("POST", "/v1/runs/"+ref.ID+"/cancel", dev.admin, nil, nil); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, raw)
	}
}
