package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/pythontest"
)

// TestPyTorchTrainerOnPluginEnv is issue "GPU trainers"' e2e: the PyTorch
// PPO example, a command run on a local cluster, steps the built-in
// CartPole-v1 through its agent's env server (its run names the env); its
// agent is killed (kill -9) mid-run, and it resumes from its synced
// checkpoint dir on the other node and reaches its target (250: what a
// resumed run learns afterwards is another random stream, and PPO on
// CartPole does not reach 475 within its budget on every stream), its
// curve in `run show` and `run scalars`. The same example reaching 475
// uninterrupted is docs/training.md's block, which TestDocsQuickStarts runs.
func TestPyTorchTrainerOnPluginEnv(t *testing.T) {
	t.Parallel()
	pythontest.Require(t, "TRAINYARD_REQUIRE_TORCH", "python-torch", "torch", "numpy")
	example, err := filepath.Abs("../../sdk/python/examples/pytorch_ppo.py")
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := crashableLab(t, t.TempDir(), `
name: lab
defaults: {provider: local, provisioner: {kind: local}}
nodes:
  - {name: node-a, resources: {gpus: "0:GTX 1080 Ti:11GB"}}
  - {name: node-b, resources: {gpus: "1:GTX 1080 Ti:11GB"}}
`, 2)
	train := func(target string) string {
		return strings.TrimSpace(cli(t, dev, "run", "train", "--cluster", "lab", "--env", "CartPole-v1", "--gpus", "1", "--sync-every", "2", "--detach", "--",
			pythontest.Python, example, "--target-return", target, "--checkpoint-every", "5"))
	}
	succeeded := func(id string) runView {
		t.Helper()
		r := waitRun(t, dev, id, 10*time.Minute, func(r runView) bool { return r.Status != "running" })
		if r.Status != "completed" || r.Progress.State != "succeeded" || !strings.Contains(r.Progress.Output, "target reached: mean return") {
			t.Fatalf("run %s %s %s (%s):\n%s", id, r.Status, r.Progress.State, r.Error, r.Progress.Output)
		}
		return r
	}

	// Killed mid-run: once a checkpoint is synced (S3 is asked, not the
	// run's last heartbeat), kill its agent.
	id := train("250")
	r := waitRun(t, dev, id, 3*time.Minute, func(runView) bool { return syncedCheckpoints(t, dev, id) >= 1 })
	first := killRunAgent(t, dev, r)
	r = succeeded(id)
	logs := cli(t, dev, "run", "logs", id)
	if len(r.Progress.Restores) == 0 || r.Progress.Restores[0].Node == first || !strings.Contains(logs, "resumed from") {
		t.Fatalf("after the kill of %s's agent the trainer should resume from its checkpoint on the other node: restores %+v\n%s", first, r.Progress.Restores, logs)
	}
	t.Logf("resumed on %s from checkpoint %d after the kill of %s's agent", r.Progress.Restores[0].Node, r.Progress.Restores[0].Checkpoint, first)

	// Its curve, across the kill, in `run scalars` and `run show`.
	var sc api.Scalars
	if err := json.Unmarshal([]byte(cli(t, dev, "run", "scalars", id, "-o", "json")), &sc); err != nil {
		t.Fatal(err)
	}
	curve := sc.Tags["charts/episodic_return"]
	if len(curve) < 5 || curve[len(curve)-1].Value < 250 {
		t.Fatalf("episodic return curve: %d points, last %+v", len(curve), curve[max(len(curve)-1, 0):])
	}
	if show := cli(t, dev, "run", "show", id); !strings.Contains(show, "scalar charts/episodic_return") {
		t.Fatalf("run show lacks the curve:\n%s", show)
	}
}

// allReduce is a 2-rank torch.distributed (gloo) trainer: 40 all-reduces
// of rank+1, half a second apart, rank 0 keeping its step in the
// checkpoint dir, so a restarted gang goes on from the last synced step.
const allReduce = `import datetime, os, sys, time
import torch, torch.distributed as dist
e = os.environ
print("env", e["RANK"], e["WORLD_SIZE"], e["LOCAL_RANK"], e["NODE_RANK"], e["MASTER_ADDR"], e["MASTER_PORT"].isdigit(), flush=True)
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
path = os.path.join(e["TRAINYARD_CHECKPOINT_DIR"], "step")
start = int(open(path).read()) if os.path.exists(path) else 0
for step in range(start, 40):
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    if rank == 0:
        with open(path + ".tmp", "w") as f:
            f.write(str(step + 1))
        os.replace(path + ".tmp", path)
    print("rank %d step %d sum %g" % (rank, step, t.item()), flush=True)
    time.sleep(0.5)
print("rank %d of %d done: sum %g, from step %d" % (rank, world, t.item(), start), flush=True)
dist.destroy_process_group()
`

// TestTwoNodeGangAllReduce is issue "GPU trainers"' multi-node e2e: a
// command run with --nodes 2 places two ranks on two nodes as one gang
// with torch.distributed's variables; both report the right all-reduce
// sum, each in its own log. kill -9 of rank 1's agent restarts the whole
// gang on a fresh placement, from rank 0's last synced step.
func TestTwoNodeGangAllReduce(t *testing.T) {
	t.Parallel()
	pythontest.Require(t, "TRAINYARD_REQUIRE_TORCH", "python-torch", "torch.distributed")
	dev, _ := crashableLab(t, t.TempDir(), `
name: lab
defaults: {provider: local, provisioner: {kind: local}}
nodes:
  - {name: node-a}
  - {name: node-b}
  - {name: node-c}
`, 3)
	id := strings.TrimSpace(cli(t, dev, "run", "train", "--cluster", "lab", "--nodes", "2", "--sync-every", "1", "--detach", "--", pythontest.Python, "-c", allReduce))
	var live struct {
		Progress struct {
			Ranks []string `json:"ranks"`
		} `json:"progress"`
	}
	waitRun(t, dev, id, 3*time.Minute, func(runView) bool {
		live.Progress.Ranks = nil
		dev.call("GET", "/v1/runs/"+id, dev.admin, nil, &live)
		return len(live.Progress.Ranks) == 2 && syncedCheckpoints(t, dev, id) >= 4 // rank 0 past step 4
	})
	if live.Progress.Ranks[0] == live.Progress.Ranks[1] {
		t.Fatalf("two ranks on one node: %v", live.Progress.Ranks)
	}
	killed := live.Progress.Ranks[1]
	killNodeAgent(t, dev, killed)
	r := waitRun(t, dev, id, 5*time.Minute, func(r runView) bool { return r.Status != "running" })
	t.Logf("failures %d, restores %+v, placements %d", r.Progress.Failures, r.Progress.Restores, r.Progress.Placements)
	if r.Progress.State != "succeeded" || r.Progress.Failures < 1 || len(r.Progress.Restores) < 1 {
		t.Fatalf("after the kill of rank 1's agent (%s) the gang should restart and finish: %s %s, %d failures, restores %+v", killed, r.Status, r.Progress.State, r.Progress.Failures, r.Progress.Restores)
	}
	for rank := range 2 {
		logs := cli(t, dev, "run", "logs", id, "--rank", fmt.Sprint(rank))
		want := fmt.Sprintf("env %d 2 0 %d 127.0.0.1 True", rank, rank)
		done := regexp.MustCompile(fmt.Sprintf(`rank %d of 2 done: sum 3, from step ([0-9]+)`, rank)).FindStringSubmatch(logs)
		if !strings.Contains(logs, want) || done == nil || done[1] == "0" || strings.Contains(logs, fmt.Sprintf("rank %d step", 1-rank)) {
			t.Fatalf("rank %d's log: want %q, a restart past step 0 and only its own lines:\n%s", rank, want, logs)
		}
		t.Logf("rank %d: %s", rank, done[0])
	}
	if show := cli(t, dev, "run", "show", id); !strings.Contains(show, "ranks") {
		t.Fatalf("run show lacks the ranks:\n%s", show)
	}
}

// syncedCheckpoints is the sequence number of run id's newest checkpoint
// in S3 (0: none yet); older ones are pruned, so their count says little.
func syncedCheckpoints(t *testing.T, dev *devProc, id string) int64 {
	var list struct {
		Checkpoints []api.CheckpointInfo `json:"checkpoints"`
	}
	if code, _, raw := dev.call("GET", "/v1/runs/"+id+"/checkpoints", dev.admin, nil, &list); code != 200 {
		t.Fatalf("run %s checkpoints: %d %s", id, code, raw)
	}
	var newest int64
	for _, c := range list.Checkpoints {
		newest = max(newest, c.Seq)
	}
	return newest
}
