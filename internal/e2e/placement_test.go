package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// placementDev starts `trainyard dev` and brings up the cluster described
// by spec (local agents that describe their CPUs and GPUs); it waits
// until every node is live.
func placementDev(t *testing.T, name, spec string) *devProc {
	t.Helper()
	dir := t.TempDir()
	dev := startDev(t, dir)
	cli(t, dev, "cluster", "up", "-f", writeFile(t, name+".yaml", spec))
	t.Cleanup(func() { killAgentsOf(dir) })
	waitFor(t, func() bool {
		var st clusterStatus
		dev.call("GET", "/v1/clusters/"+name, dev.admin, nil, &st)
		for _, n := range st.Nodes {
			if n.Health != "Idle" && n.Health != "Healthy" {
				return false
			}
		}
		return len(st.Nodes) > 0
	})
	return dev
}

// gate is a command that runs until its stop file appears: tests end
// work when they choose.
type gate struct{ dir string }

func (g gate) cmd(name string) []string {
	return []string{"sh", "-c", "while [ ! -e " + filepath.Join(g.dir, name) + " ]; do sleep 0.2; done"}
}

func (g gate) open(t *testing.T, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(g.dir, name), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// workJob submits a job described as work (POST /v1/jobs) and returns its
// id; body is the work description with its cluster.
func workJob(t *testing.T, dev *devProc, body map[string]any) string {
	t.Helper()
	var ref struct {
		WorkflowID string `json:"workflow_id"`
	}
	if code, _, raw := dev.call("POST", "/v1/jobs", dev.admin, body, &ref); code != http.StatusCreated {
		t.Fatalf("submit job %v: %d %s", body, code, raw)
	}
	return ref.WorkflowID
}

// oneRole is a one-role work description on the cluster.
func oneRole(cluster, kind, config string, gpus float64, cmd []string) map[string]any {
	return map[string]any{"cluster": cluster, "kind": kind, "config": config, "command": cmd,
		"roles": []any{map[string]any{"name": "main", "cpus": 0.5, "gpus": gpus, "memory_mb": 64}}}
}

type placedJob struct {
	Status   string `json:"status"`
	Progress struct {
		State     string `json:"state"`
		Node      string `json:"node"`
		Reason    string `json:"reason"`
		Instances []struct {
			Role           string `json:"role"`
			Instance       int    `json:"instance"`
			Node           string `json:"node"`
			State          string `json:"state"`
			MaxConcurrency int    `json:"max_concurrency"`
		} `json:"instances"`
	} `json:"progress"`
}

func showJob(t *testing.T, dev *devProc, id string) placedJob {
	t.Helper()
	var j placedJob
	if code, _, raw := dev.call("GET", "/v1/jobs/"+id, dev.admin, nil, &j); code != 200 {
		t.Fatalf("job %s: %d %s", id, code, raw)
	}
	return j
}

// waitJob polls a job until cond holds (60 s), failing with its last view.
func waitJob(t *testing.T, dev *devProc, id string, what string, cond func(placedJob) bool) placedJob {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j := showJob(t, dev, id)
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: not %s within 60s: %+v", id, what, j)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func running(j placedJob) bool { return j.Progress.State == "running" }

type usageView struct {
	GPUSecondsByProvider    map[string]float64 `json:"gpu_seconds_by_provider"`
	GPUSecondsByKind        map[string]float64 `json:"gpu_seconds_by_kind"`
	GPUSecondsByTier        map[string]float64 `json:"gpu_seconds_by_tier"`
	RunningTrainingByConfig map[string]int     `json:"running_training_by_config"`
	Quotas                  []struct {
		Config     string  `json:"config"`
		Tier1Share float64 `json:"tier1_share"`
	} `json:"quotas"`
	Queue []struct {
		WorkID            string `json:"work_id"`
		EffectivePriority int    `json:"effective_priority"`
		Reason            string `json:"reason"`
		Policy            bool   `json:"policy"`
	} `json:"queue"`
}

const seed002Fleet = `
name: fleet
defaults:
  provisioner: {kind: local}
nodes:
  - {name: vast-1, provider: vast, ephemeral: true, resources: {cpus: 4, gpus: "0:RTX 4090:24GB"}}
  - {name: runpod-1, provider: runpod, resources: {cpus: 4, gpus: "1:H100:80GB"}}
  - {name: nebius-1, provider: nebius, resources: {cpus: 4, gpus: "2:A40:48GB"}}
`

// TestSeed002FleetDecidesPlacement drives seed 002's rules through real
// submissions: training avoids the cheap ephemeral node, self-play
// prefers it, a hexagonal config goes to a ≥ 32 GB GPU, a second training
// of a config waits for the first, the ledger shows the usage, a quota
// change flips the queued work in a dry run and then holds it, and a
// starved work passes fresher higher-priority work once boosted.
func TestSeed002FleetDecidesPlacement(t *testing.T) {
	t.Parallel()
	dev := placementDev(t, "fleet", seed002Fleet)
	g := gate{t.TempDir()}
	node := func(id string) string { return waitJob(t, dev, id, "running", running).Progress.Node }

	t1 := workJob(t, dev, oneRole("fleet", "training", "square8_2p", 1, g.cmd("t1")))
	if n := node(t1); n != "runpod-1" {
		t.Fatalf("training placed on %s, want runpod-1 (Tier 1, preferred; vast is ephemeral although cheapest)", n)
	}
	s1 := workJob(t, dev, oneRole("fleet", "selfplay", "hex8_2p", 1, g.cmd("s1")))
	if n := node(s1); n != "vast-1" {
		t.Fatalf("self-play placed on %s, want vast-1 (self-play prefers vast)", n)
	}
	h1 := workJob(t, dev, oneRole("fleet", "selfplay", "hexagonal_2p", 1, g.cmd("h1")))
	if n := node(h1); n != "nebius-1" {
		t.Fatalf("hexagonal self-play placed on %s, want nebius-1 (the only free GPU with >= 32 GB)", n)
	}
	t2 := workJob(t, dev, oneRole("fleet", "training", "square8_2p", 1, g.cmd("t2")))
	waitJob(t, dev, t2, "waiting on one_training_per_config", func(j placedJob) bool {
		return j.Progress.State == "waiting" && strings.Contains(j.Progress.Reason, "one_training_per_config")
	})

	// vast-1 frees up; a training of another config still will not take it.
	g.open(t, "s1")
	waitJob(t, dev, s1, "done", func(j placedJob) bool { return j.Status == "completed" })
	t3 := workJob(t, dev, oneRole("fleet", "training", "square19_2p", 1, g.cmd("t3")))
	j3 := waitJob(t, dev, t3, "waiting, vast-1 refused by provider", func(j placedJob) bool {
		return j.Progress.State == "waiting" && strings.Contains(j.Progress.Reason, "provider vast (vast-1)")
	})
	time.Sleep(3 * time.Second) // it asks again every 2 s: still not on vast
	if j3 = showJob(t, dev, t3); j3.Progress.State != "waiting" {
		t.Fatalf("training took the ephemeral node: %+v", j3)
	}

	var u usageView
	if code, _, raw := dev.call("GET", "/v1/usage?cluster=fleet", dev.admin, nil, &u); code != 200 {
		t.Fatalf("usage: %d %s", code, raw)
	}
	if u.RunningTrainingByConfig["square8_2p"] != 1 || u.GPUSecondsByProvider["runpod"] <= 0 || u.GPUSecondsByProvider["vast"] <= 0 ||
		u.GPUSecondsByKind["selfplay"] <= 0 || u.GPUSecondsByTier["1"] <= 0 {
		t.Fatalf("usage ledger: %+v", u)
	}
	queued := map[string]bool{}
	for _, q := range u.Queue {
		queued[q.WorkID] = q.Policy
	}
	if held, ok := queued[t2]; !ok || !held {
		t.Fatalf("queue should hold %s by policy: %+v", t2, u.Queue)
	}
	if out := cli(t, dev, "usage", "--cluster", "fleet"); !strings.Contains(out, "square8_2p") || !strings.Contains(out, "one_training_per_config") {
		t.Fatalf("trainyard usage:\n%s", out)
	}

	// The first training ends: the second runs.
	g.open(t, "t1")
	if n := node(t2); n != "runpod-1" {
		t.Fatalf("second training placed on %s, want runpod-1", n)
	}

	// Quota: square8 has Tier-1 time now. A proposed bundle with a tiny
	// square8 quota flips the queued square8 self-play in a dry run over
	// the live queue, and once pushed holds it with the rule named.
	s2 := workJob(t, dev, map[string]any{"cluster": "fleet", "kind": "selfplay", "config": "square8_2p", "command": g.cmd("s2"),
		"providers": map[string]any{"avoid": []string{"vast"}},
		"roles":     []any{map[string]any{"name": "main", "cpus": 0.5, "gpus": 1, "memory_mb": 64}}})
	waitJob(t, dev, s2, "waiting for a GPU", func(j placedJob) bool {
		return j.Progress.State == "waiting" && strings.Contains(j.Progress.Reason, "gpu")
	})
	proposed := copyDir(t, "../../policies")
	editFile(t, filepath.Join(proposed, "data.json"), func(s string) string {
		s = strings.Replace(s, `"square8_*": 0.10`, `"square8_*": 0.0000001`, 1)
		return strings.Replace(s, `"boost_after_seconds": 14400`, `"boost_after_seconds": 3`, 1)
	})
	editFile(t, filepath.Join(proposed, "quotas_test.rego"), func(s string) string {
		s = strings.Replace(s, `{"config": "square8_3p", "quota": 0.10}`, `{"config": "square8_3p", "quota": 0.0000001}`, 1)
		return strings.NewReplacer(`"waiting": 14399`, `"waiting": 2`, `"waiting": 14400`, `"waiting": 3`).Replace(s)
	})
	var dry struct {
		Changes []dryChange `json:"changes"`
	}
	out := cli(t, dev, "policy", "dry-run", proposed, "--cluster", "fleet", "-o", "json")
	if err := json.Unmarshal([]byte(out), &dry); err != nil {
		t.Fatal(err, out)
	}
	flipped := slices.ContainsFunc(dry.Changes, func(c dryChange) bool {
		return c.WorkID == s2 && c.Before.Allow && !c.After.Allow && len(c.Added) > 0 && c.Added[0].Rule == "config_quota"
	})
	if !flipped {
		t.Fatalf("dry run over the live queue should flip %s by config_quota: %s", s2, out)
	}
	cli(t, dev, "policy", "push", proposed)
	waitJob(t, dev, s2, "held by config_quota", func(j placedJob) bool {
		return j.Progress.State == "waiting" && strings.Contains(j.Progress.Reason, "config_quota")
	})

	// nebius frees up: the held square8 self-play does not take it, the
	// waiting training does (never vast).
	g.open(t, "h1")
	if n := node(t3); n != "nebius-1" {
		t.Fatalf("training placed on %s, want nebius-1", n)
	}

	// Starvation: a starved priority-0 work passes a fresher priority-50
	// one once its boost (100 after 3 s in the pushed bundle) applies.
	avoidVast := func(prio int, name string) map[string]any {
		return map[string]any{"cluster": "fleet", "priority": prio, "command": g.cmd(name), "providers": map[string]any{"avoid": []string{"vast"}},
			"roles": []any{map[string]any{"name": "main", "cpus": 0.5, "gpus": 1, "memory_mb": 64}}}
	}
	starved := workJob(t, dev, avoidVast(0, "a"))
	waitJob(t, dev, starved, "waiting", func(j placedJob) bool { return j.Progress.State == "waiting" })
	time.Sleep(4 * time.Second)
	fresh := workJob(t, dev, avoidVast(50, "b"))
	waitJob(t, dev, fresh, "waiting", func(j placedJob) bool { return j.Progress.State == "waiting" })
	dev.call("GET", "/v1/usage?cluster=fleet", dev.admin, nil, &u)
	for _, q := range u.Queue {
		if q.WorkID == starved && q.EffectivePriority != 100 {
			t.Fatalf("starved work's effective priority %d, want 100 (boosted): %+v", q.EffectivePriority, u.Queue)
		}
	}
	g.open(t, "t3")
	if n := node(starved); n != "nebius-1" {
		t.Fatalf("starved work placed on %s, want nebius-1", n)
	}
	if j := showJob(t, dev, fresh); j.Progress.State != "waiting" {
		t.Fatalf("fresher work should still wait behind the boosted one: %+v", j)
	}
}

// dryChange is one changed decision of a policy dry run.
type dryChange struct {
	WorkID string `json:"work_id"`
	Before struct {
		Allow bool `json:"allow"`
	} `json:"before"`
	After struct {
		Allow bool `json:"allow"`
	} `json:"after"`
	Added []struct {
		Rule string `json:"rule"`
	} `json:"added"`
}

func editFile(t *testing.T, path string, edit func(string) string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	after := edit(string(b))
	if after == string(b) {
		t.Fatalf("%s: edit changed nothing", path)
	}
	if err := os.WriteFile(path, []byte(after), 0o644); err != nil {
		t.Fatal(err)
	}
}

const seed003Cluster = `
name: llm
defaults:
  provider: local
  provisioner: {kind: local}
nodes:
  - {name: gpu-1, resources: {cpus: 8, gpus: "0:RTX A6000:48GB"}}
  - {name: cpu-1, labels: {pool: cpu}, resources: {cpus: 4, gpus: none}}
  - {name: cpu-2, labels: {pool: cpu}, resources: {cpus: 4, gpus: none}}
`

// seed003Layout is seed 003's loop as one job: a trainer with a
// trajectory pool and weight sync packed with it, and rollout workers
// (0 GPUs, max_concurrency 100) spread over the CPU pool. Each instance
// records who it is and its concurrency limit, then waits for stop.
func seed003Layout(cluster, config string, g gate, marks string) map[string]any {
	role := func(name string, count int, cpus, gpus float64, group string) map[string]any {
		return map[string]any{"name": name, "count": count, "cpus": cpus, "gpus": gpus, "memory_mb": 128, "group": group,
			"command": []string{"sh", "-c", `touch "` + marks + `/$TRAINYARD_ROLE-$TRAINYARD_INSTANCE-$TRAINYARD_MAX_CONCURRENCY"; ` + strings.Join(g.cmd("stop-" + config)[2:], "")}}
	}
	workers := role("rollout_worker", 4, 1, 0, "rollouts")
	workers["max_concurrency"] = 100
	workers["node_affinity"] = []any{map[string]any{"key": "pool", "values": []string{"cpu"}}}
	return map[string]any{"cluster": cluster, "kind": "training", "config": config,
		"roles":  []any{role("trainer", 1, 4, 1, "learner"), role("trajectory_pool", 1, 1, 0, "learner"), role("weight_sync", 1, 0.5, 0, "learner"), workers},
		"groups": []any{map[string]any{"name": "learner", "strategy": "STRICT_PACK"}, map[string]any{"name": "rollouts", "strategy": "SPREAD"}}}
}

// TestSeed003LayoutIsOneGang: seed 003's layout submitted as one job is
// placed as a gang (learner group on the GPU node, workers spread over
// the CPU pool with their max_concurrency), a second one waits whole and
// says why, and a layout no cluster shape could hold is refused.
func TestSeed003LayoutIsOneGang(t *testing.T) {
	t.Parallel()
	dev := placementDev(t, "llm", seed003Cluster)
	g, marks := gate{t.TempDir()}, t.TempDir()

	first := workJob(t, dev, seed003Layout("llm", "square8_2p", g, marks))
	j := waitJob(t, dev, first, "running with 7 instances", func(j placedJob) bool { return running(j) && len(j.Progress.Instances) == 7 })
	perNode := map[string]int{}
	for _, in := range j.Progress.Instances {
		switch in.Role {
		case "trainer", "trajectory_pool", "weight_sync":
			if in.Node != "gpu-1" {
				t.Errorf("%s#%d on %s, want gpu-1 with the rest of its STRICT_PACK group", in.Role, in.Instance, in.Node)
			}
		case "rollout_worker":
			perNode[in.Node]++
			if in.MaxConcurrency != 100 {
				t.Errorf("rollout_worker#%d shows max_concurrency %d, want 100", in.Instance, in.MaxConcurrency)
			}
		}
	}
	if perNode["cpu-1"] != 2 || perNode["cpu-2"] != 2 {
		t.Fatalf("rollout workers per node %v, want 2 on each CPU node (SPREAD over the pool)", perNode)
	}
	waitFor(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(marks, "rollout_worker-*-100"))
		return len(m) == 4 // each worker was handed its limit
	})

	// A second loop (another config) cannot get the GPU: it waits whole.
	second := workJob(t, dev, seed003Layout("llm", "hex8_2p", g, marks))
	w := waitJob(t, dev, second, "waiting for the GPU", func(j placedJob) bool {
		return j.Progress.State == "waiting" && strings.Contains(j.Progress.Reason, "group learner")
	})
	var st struct {
		Nodes []struct {
			Name string   `json:"name"`
			Jobs []string `json:"jobs"`
		} `json:"nodes"`
	}
	dev.call("GET", "/v1/clusters/llm", dev.admin, nil, &st)
	for _, n := range st.Nodes {
		for _, job := range n.Jobs {
			if strings.HasPrefix(job, second) {
				t.Fatalf("waiting gang holds part of the cluster (%s on %s): %+v", job, n.Name, w)
			}
		}
	}
	g.open(t, "stop-square8_2p")
	waitJob(t, dev, second, "running whole once the first ends", func(j placedJob) bool { return running(j) && len(j.Progress.Instances) == 7 })
	g.open(t, "stop-hex8_2p")
	if j := waitJob(t, dev, first, "completed", func(j placedJob) bool { return j.Status != "running" }); j.Status != "completed" {
		t.Fatalf("first loop: %+v", j)
	}

	// A bad field is named.
	code, hdr, raw := dev.call("POST", "/v1/jobs", dev.admin, map[string]any{"cluster": "llm", "command": []string{"true"},
		"roles": []any{map[string]any{"name": "t", "cpus": 1, "gpus": 1.5}}}, nil)
	assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, "body.roles[0].gpus")

	// Four strictly spread workers on a two-node pool can never be placed.
	bad := seed003Layout("llm", "square8_3p", g, marks)
	bad["groups"] = []any{map[string]any{"name": "learner", "strategy": "STRICT_PACK"}, map[string]any{"name": "rollouts", "strategy": "STRICT_SPREAD"}}
	code, hdr, raw = dev.call("POST", "/v1/jobs", dev.admin, bad, nil)
	assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, "body")
	if !strings.Contains(string(raw), "can never be placed") {
		t.Fatalf("infeasible gang: %s", raw)
	}
}

// TestSeed000AntiAffineWorkers: seed 000's seven rollout workers, each
// asking for 85% of a node and anti-affine to each other, land one per
// node; a worker asking for more than the 90% capacity share is refused
// with the rule.
func TestSeed000AntiAffineWorkers(t *testing.T) {
	t.Parallel()
	var nodes strings.Builder
	for i := 1; i <= 7; i++ {
		nodes.WriteString("  - {name: box-" + itoa(i) + ", resources: {cpus: 4, gpus: none}}\n")
	}
	dev := placementDev(t, "ray", "name: ray\ndefaults:\n  provider: lab\n  provisioner: {kind: local}\nnodes:\n"+nodes.String())
	g := gate{t.TempDir()}
	workers := func(cpus float64) map[string]any {
		return map[string]any{"cluster": "ray", "kind": "rollout", "command": g.cmd("stop"),
			"roles": []any{map[string]any{"name": "rollout_worker", "count": 7, "cpus": cpus, "memory_mb": 256,
				"anti_affinity": []any{map[string]any{"key": "role", "values": []string{"rollout_worker"}}}}}}
	}
	id := workJob(t, dev, workers(3.4))
	j := waitJob(t, dev, id, "running with 7 workers", func(j placedJob) bool { return running(j) && len(j.Progress.Instances) == 7 })
	seen := map[string]bool{}
	for _, in := range j.Progress.Instances {
		if seen[in.Node] {
			t.Fatalf("two workers on %s: %+v", in.Node, j.Progress.Instances)
		}
		seen[in.Node] = true
	}
	code, hdr, raw := dev.call("POST", "/v1/jobs", dev.admin, workers(3.8), nil)
	assertProblem(t, code, hdr, raw, http.StatusForbidden, "policy.node_capacity")
	g.open(t, "stop")
}
