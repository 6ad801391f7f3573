package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/api"
)

// TestPyTorchTrainerOnPluginEnv is issue "GPU trainers"' e2e: the PyTorch
// PPO example, a command run on a 2-node local cluster, steps the built-in
// CartPole-v1 through its agent's env server (its run names the env) and
// reaches 475 on CPU torch; kill -9 of its agent mid-run restarts it on the
// other node from its synced checkpoint dir, and its curve shows in `run
// show` and `run scalars`.
func TestPyTorchTrainerOnPluginEnv(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import torch, numpy").Run(); err != nil {
		if os.Getenv("TRAINYARD_REQUIRE_TORCH") != "" {
			t.Fatalf("/usr/bin/python3 cannot import torch and numpy (%v): make test installs python3-torch", err)
		}
		t.Skipf("no torch for /usr/bin/python3: %v", err)
	}
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
	id := strings.TrimSpace(cli(t, dev, "run", "train", "--cluster", "lab", "--env", "CartPole-v1", "--gpus", "1", "--sync-every", "2", "--detach", "--",
		"/usr/bin/python3", example, "--target-return", "475", "--checkpoint-every", "5"))
	// Mid-run: once two checkpoints are synced (iterations 5 and 10), kill
	// its agent.
	r := waitRun(t, dev, id, 5*time.Minute, func(r runView) bool { return r.Status != "running" || r.Progress.Checkpoint >= 2 })
	if r.Status != "running" {
		t.Fatalf("run ended before the kill: %s %s\n%s", r.Status, r.Error, r.Progress.Output)
	}
	first := killRunAgent(t, dev, r)
	r = waitRun(t, dev, id, 10*time.Minute, func(r runView) bool { return r.Status != "running" })
	out := r.Progress.Output
	t.Logf("run %s: %s, %s", id, r.Status, r.Progress.State)
	if r.Status != "completed" || r.Progress.State != "succeeded" || !strings.Contains(out, "target reached: mean return") {
		t.Fatalf("run %s %s (%s):\n%s", id, r.Status, r.Error, out)
	}
	logs := cli(t, dev, "run", "logs", id)
	if len(r.Progress.Restores) == 0 || r.Progress.Restores[0].Node == first || !strings.Contains(logs, "resumed from") {
		t.Fatalf("after the kill of %s's agent the trainer should resume from its checkpoint on the other node: restores %+v\n%s", first, r.Progress.Restores, logs)
	}
	var sc api.Scalars
	if err := json.Unmarshal([]byte(cli(t, dev, "run", "scalars", id, "-o", "json")), &sc); err != nil {
		t.Fatal(err)
	}
	curve := sc.Tags["charts/episodic_return"]
	if len(curve) < 10 || curve[len(curve)-1].Value < 475 {
		t.Fatalf("episodic return curve: %d points, last %+v", len(curve), curve[len(curve)-1:])
	}
	if show := cli(t, dev, "run", "show", id); !strings.Contains(show, "scalar charts/episodic_return") {
		t.Fatalf("run show lacks the curve:\n%s", show)
	}
	t.Logf("reached %.1f at step %d, %d points; resumed on %s after the kill of %s", curve[len(curve)-1].Value, curve[len(curve)-1].Step, len(curve), r.Progress.Restores[0].Node, first)
}
