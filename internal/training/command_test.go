package training

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/pluginhost"
)

// TestCommandTrainer: a bring-your-own trainer gets exactly its GPUs, a
// minimal environment (no host secrets) and a checkpoint dir that is synced
// while it runs and at exit, and restored before a restart on another
// node; its exit status decides the outcome.
func TestCommandTrainer(t *testing.T) {
	ctx := context.Background()
	r := &Runner{Checkpoints: checkpoint.New(bucket, checkpoint.Options{Prefix: "ckpt-command"})}
	// Fresh run ids, so -count=N starts from no checkpoints each time.
	run := fmt.Sprintf("byo-%d", time.Now().UnixNano())
	host := []string{"PATH=/usr/bin:/bin", "AWS_SECRET_ACCESS_KEY=do-not-leak", "HOME=/root"}
	spec := func(script string, sync int) Spec {
		return Spec{Cluster: "lab", Algorithm: AlgorithmCommand, Command: []string{"sh", "-c", script}, SyncEverySeconds: sync}.WithDefaults()
	}

	// Node A: a fresh dir, GPU 2, periodic sync while it sleeps.
	var beats []CommandStatus
	st, err := r.RunCommand(ctx, CommandInput{RunID: run, Dir: t.TempDir(), Env: host, GPUs: []int{2},
		Spec: spec(`test ! -e "$TRAINYARD_CHECKPOINT_DIR/model.txt" || exit 3
echo gpus=$CUDA_VISIBLE_DEVICES secret=${AWS_SECRET_ACCESS_KEY:-none} run=$TRAINYARD_RUN_ID
echo v1 > "$TRAINYARD_CHECKPOINT_DIR/model.txt"; sleep 3; echo trained`, 1)},
		func(s CommandStatus) { beats = append(beats, s) })
	if err != nil {
		t.Fatalf("first run: %v (%+v)", err, st)
	}
	if !strings.Contains(st.Output, "gpus=2 secret=none run="+run) || !strings.Contains(st.Output, "trained") || st.Restored != 0 || st.Checkpoint != 1 {
		t.Fatalf("first run: %+v", st)
	}
	if len(beats) == 0 || beats[len(beats)-1].Checkpoint != 1 {
		t.Fatalf("the dir was not synced while the trainer ran: beats %+v", beats)
	}

	// Node B: restored dir; a failing exit still syncs what it wrote.
	st, err = r.RunCommand(ctx, CommandInput{RunID: run, Dir: t.TempDir(), Env: host,
		Spec: spec(`cat "$TRAINYARD_CHECKPOINT_DIR/model.txt"; echo v2 >> "$TRAINYARD_CHECKPOINT_DIR/model.txt"; echo "loss is NaN" >&2; exit 7`, 30)}, nil)
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "exited with code 7: loss is NaN") {
		t.Fatalf("failing trainer: %v", err)
	}
	if st.Restored != 1 || st.Checkpoint != 2 || st.ExitCode != 7 || !strings.HasPrefix(st.Output, "v1") {
		t.Fatalf("failing trainer: %+v", st)
	}

	// Cancelled: the process is stopped, nothing hangs.
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(300*time.Millisecond, cancel)
	if _, err := r.RunCommand(cctx, CommandInput{RunID: run + "-cancel", Dir: t.TempDir(), Env: host, Spec: spec("sleep 60", 30)}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled trainer: %v", err)
	}
	ms, _ := r.Checkpoints.List(ctx, run)
	if len(ms) != 2 || ms[1].Files[0].Path != "model.txt" || ms[1].Files[0].Size != int64(len("v1\nv2\n")) {
		t.Fatalf("checkpoints: %+v", ms)
	}
}

// TestCommandTrainerStepsItsEnv: a command run that names an env plugin
// gets an env server for it (TRAINYARD_ENV_SOCKET); the Python client
// steps it from the trainer's process, and any other plugin is refused.
func TestCommandTrainerStepsItsEnv(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import numpy").Run(); err != nil {
		if os.Getenv("TRAINYARD_REQUIRE_NUMPY") != "" {
			t.Fatalf("/usr/bin/python3 cannot import numpy: %v", err)
		}
		t.Skipf("/usr/bin/python3 cannot import numpy: %v", err)
	}
	ctx := context.Background()
	wasm := cartpoleWasm
	sha := pluginhost.SHA256(wasm)
	_, file, _, _ := runtime.Caller(0) // the embedded S3 server changed the working directory
	sdk := filepath.Join(filepath.Dir(file), "..", "..", "sdk", "python")
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	r := &Runner{Plugins: rt, Modules: Modules{sha: wasm}, Checkpoints: checkpoint.New(bucket, checkpoint.Options{Prefix: "ckpt-command-envs"})}
	script := fmt.Sprintf(`import os, sys
sys.path.insert(0, %q)
import numpy as np, trainyard.envs as E
print("socket", os.environ["TRAINYARD_ENV_SOCKET"].endswith("envs.sock"), os.environ["TRAINYARD_ENV"])
with E.make("CartPole-v1@1.0.0", num_envs=8, seed=1) as env:
    obs, _ = env.reset(seed=1)
    done = 0
    for t in range(100):
        obs, r, te, tr, info = env.step(np.zeros(8))
        done += int((te | tr).sum())
    print("plugin", env.plugin, "obs", obs.shape, "episodes", done > 0)
try:
    E.make("Pendulum-v1", num_envs=1)
except E.EnvServerError as e:
    print("refused:", e)
`, sdk)
	spec := Spec{Cluster: "lab", Algorithm: AlgorithmCommand, Command: []string{"/usr/bin/python3", "-c", script}, SyncEverySeconds: 30}.WithDefaults()
	st, err := r.RunCommand(ctx, CommandInput{RunID: fmt.Sprintf("byo-envs-%d", time.Now().UnixNano()), Dir: t.TempDir(),
		Env: []string{"PATH=/usr/bin:/bin"}, EnvPlugin: sha, Spec: spec}, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, st.Output)
	}
	for _, want := range []string{"socket True CartPole-v1@1.0.0", "plugin CartPole-v1@1.0.0 obs (8, 4) episodes True", `refused: env server: plugin "Pendulum-v1" is not granted to this run`} {
		if !strings.Contains(st.Output, want) {
			t.Errorf("output lacks %q:\n%s", want, st.Output)
		}
	}
}
