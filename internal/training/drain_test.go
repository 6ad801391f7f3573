package training

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/agent/drain"
	"github.com/trainyard/trainyard/internal/learner"
)

// TestDrainedSegmentLosesNothing is issue 10's "use the preemption notice":
// a notice in the middle of a checkpoint interval ends the segment after
// the iteration in flight with a checkpoint of it, so the run continues on
// another node from exactly there (0 iterations lost, where a kill -9 would
// lose every iteration since the last periodic checkpoint), its counters
// continuing.
func TestDrainedSegmentLosesNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// A small batch (4 envs × 32 steps): the drain's bookkeeping is what
	// is checked, and under -race the network's arithmetic is most of the
	// test's time.
	spec := Spec{Cluster: "lab", Env: "CartPole-v1", Seed: 7, Iterations: 6, CheckpointEvery: 100, EnvsPerWorker: 4, EpisodeLength: 32}.WithDefaults()

	// Uninterrupted: one segment of 6 iterations.
	whole, err := f.runner().RunSegment(ctx, SegmentInput{RunID: "whole", Spec: spec, EnvPlugin: f.cartpol, Iterations: 100}, nil)
	if err != nil || whole.Iteration != 6 {
		t.Fatalf("uninterrupted run: %+v %v", whole, err)
	}

	// Drained: the notice arrives during iteration 2 of a 100-iteration
	// segment.
	nodeA := f.runner()
	nodeA.Drain = drain.New()
	in := SegmentInput{RunID: "drained", Spec: spec, EnvPlugin: f.cartpol, Iterations: 100}
	seg, err := nodeA.RunSegment(ctx, in, func(m learner.Metrics) {
		if m.Iteration == 2 {
			nodeA.Drain.Start("test notice", time.Now().Add(time.Minute))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if seg.Drained != "test notice" || seg.Done || seg.Iteration != 2 || seg.Checkpoint != 1 || len(seg.Metrics) != 2 {
		t.Fatalf("drained segment: %+v", seg)
	}
	m, err := f.ckpts.Get(ctx, "drained", seg.Checkpoint)
	if err != nil || m.Meta.Iteration != 2 {
		t.Fatalf("just-in-time checkpoint: %+v %v", m.Meta, err)
	}
	lost := seg.Iteration - m.Meta.Iteration
	t.Logf("work lost to the drain: %d iterations (a kill -9 at that moment: %d, everything since the last periodic checkpoint)", lost, seg.Iteration)

	// A drained agent starts nothing new: a segment placed on it before
	// the cluster knew returns at once, without touching the checkpoint.
	again, err := nodeA.RunSegment(ctx, SegmentInput{RunID: "drained", Spec: spec, EnvPlugin: f.cartpol, Iterations: 100, FromCheckpoint: seg.Checkpoint}, nil)
	if err != nil || again.Drained == "" || len(again.Metrics) != 0 || again.Checkpoint != seg.Checkpoint {
		t.Fatalf("segment on a draining node: %+v %v", again, err)
	}

	// Node B continues from iteration 3.
	in.FromCheckpoint = seg.Checkpoint
	rest, err := f.runner().RunSegment(ctx, in, nil)
	if err != nil || rest.RestoredFrom != seg.Checkpoint || rest.Metrics[0].Iteration != 3 || rest.Iteration != 6 || !rest.Done {
		t.Fatalf("resumed segment: %+v %v", rest, err)
	}
	if rest.Metrics[0].Timesteps <= seg.Metrics[1].Timesteps {
		t.Fatalf("timesteps went back: %d after %d", rest.Metrics[0].Timesteps, seg.Metrics[1].Timesteps)
	}

	// Counters continue exactly (the Go SDK's envs also save their state,
	// so the resumed run is the uninterrupted one bit for bit:
	// TestRestoredRunNeitherRestartsNorDrifts).
	if whole.Iteration != rest.Iteration || whole.Timesteps != rest.Timesteps {
		t.Fatalf("counters: uninterrupted (%d, %d), drained and resumed (%d, %d)", whole.Iteration, whole.Timesteps, rest.Iteration, rest.Timesteps)
	}
}

// TestDrainedCommandTrainer: a bring-your-own trainer gets SIGTERM on a
// drain, and what it writes then is synced before the run moves.
func TestDrainedCommandTrainer(t *testing.T) {
	r := &Runner{Checkpoints: newFixture(t).ckpts, Drain: drain.New()}
	run := fmt.Sprintf("byo-drain-%d", time.Now().UnixNano())
	script := `trap 'echo "saved at step $i" > "$TRAINYARD_CHECKPOINT_DIR/model.txt"; exit 0' TERM
i=0; echo started; while :; do i=$((i+1)); sleep 0.05; done`
	started := make(chan struct{})
	go func() {
		<-started
		r.Drain.Start("test notice", time.Now().Add(10*time.Second))
	}()
	var once bool
	st, err := r.RunCommand(context.Background(), CommandInput{RunID: run, Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"},
		Spec: Spec{Cluster: "lab", Algorithm: AlgorithmCommand, Command: []string{"sh", "-c", script}}.WithDefaults()},
		func(s CommandStatus) {
			if !once && strings.Contains(s.Output, "started") {
				once = true
				close(started)
			}
		})
	if err != nil || st.Drained != "test notice" || st.Checkpoint != 1 {
		t.Fatalf("drained trainer: %+v %v", st, err)
	}
	ms, err := r.Checkpoints.List(context.Background(), run)
	if err != nil || len(ms) != 1 || ms[0].Files[0].Path != "model.txt" {
		t.Fatalf("checkpoints: %+v %v", ms, err)
	}
}
