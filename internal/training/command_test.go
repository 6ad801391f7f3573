package training

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/internal/pythontest"
	"github.com/trainyard/trainyard/internal/workspec"
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
	pythontest.Require(t, "TRAINYARD_REQUIRE_NUMPY", "python-numpy", "numpy")
	ctx := context.Background()
	wasm := cartpoleWasm
	sha := pluginhost.SHA256(wasm)
	_, file, _, _ := runtime.Caller(0) // the embedded S3 server changed the working directory
	sdk := filepath.Join(filepath.Dir(file), "..", "..", "sdk", "python")
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: plugintest.CacheDir(t)})
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
	spec := Spec{Cluster: "lab", Algorithm: AlgorithmCommand, Command: []string{pythontest.Python, "-c", script}, SyncEverySeconds: 30}.WithDefaults()
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

// TestMultiNodeWork: a command run with nodes > 1 is one gang of that
// many trainer ranks, one per node; each rank's process sees
// torch.distributed's variables and torchrun's.
func TestMultiNodeWork(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     Spec
		ranks    int
		strategy workspec.Strategy
		invalid  string
	}{
		{"one node", Spec{Cluster: "lab", Algorithm: AlgorithmCommand, Command: []string{"train"}, GPUs: 1}, 1, "", ""},
		{"three nodes", Spec{Cluster: "lab", Algorithm: AlgorithmCommand, Command: []string{"train"}, GPUs: 2, Nodes: 3}, 3, workspec.StrictSpread, ""},
		{"ppo has no ranks", Spec{Cluster: "lab", Env: "CartPole-v1", Nodes: 2}, 1, "", "nodes belong to algorithm"},
		{"too many", Spec{Cluster: "lab", Algorithm: AlgorithmCommand, Command: []string{"train"}, Nodes: 65}, 65, workspec.StrictSpread, "nodes: must be 1..64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.spec.WithDefaults()
			err := s.Validate()
			if (err != nil) != (tc.invalid != "") || err != nil && !strings.Contains(err.Error(), tc.invalid) {
				t.Fatalf("Validate: %v, want %q", err, tc.invalid)
			}
			ws := s.TrainerWork("run-1", "training")
			role := ws.Roles[0]
			if s.Ranks() != tc.ranks || role.Count != tc.ranks || role.GPUs != float64(s.GPUs) {
				t.Fatalf("ranks %d, role %+v; want %d ranks of %d GPUs", s.Ranks(), role, tc.ranks, s.GPUs)
			}
			if got := ""; len(ws.Groups) > 0 {
				got = string(ws.Groups[0].Strategy)
				if workspec.Strategy(got) != tc.strategy || role.Group != ws.Groups[0].Name {
					t.Fatalf("groups %+v, role group %q; want %s", ws.Groups, role.Group, tc.strategy)
				}
			} else if tc.strategy != "" {
				t.Fatalf("no group, want %s", tc.strategy)
			}
		})
	}
	env := CommandInput{Rank: 1, WorldSize: 2, MasterAddr: "10.0.0.5", MasterPort: 29500}.gangEnv()
	want := map[string]string{"MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500", "WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "0", "NODE_RANK": "1",
		"PET_MASTER_ADDR": "10.0.0.5", "PET_MASTER_PORT": "29500", "PET_NNODES": "2", "PET_NODE_RANK": "1"}
	if !maps.Equal(env, want) {
		t.Fatalf("gang env %v, want %v", env, want)
	}
	if env := (CommandInput{WorldSize: 1}).gangEnv(); env != nil {
		t.Fatalf("a single process gets %v", env)
	}
}

// TestIfaceOf: a gang rank's transport interface is the one holding the
// agent's advertised address.
func TestIfaceOf(t *testing.T) {
	for addr, want := range map[string]string{"127.0.0.1": "lo", "198.18.255.254": "", "not an ip": "", "": ""} {
		if got := ifaceOf(addr); got != want {
			t.Errorf("ifaceOf(%q) = %q, want %q", addr, got, want)
		}
	}
}
