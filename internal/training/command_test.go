package training

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/checkpoint"
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
