//go:build !race

// Compute-only run-path tests (exact resume, restore, curves across lost
// segments): bit-for-bit comparisons of whole PPO segments, with no
// concurrency of their own that the race detector could check, and 10-20x
// slower under it (the WASM compiler and the learner are instrumented). `go
// test -race` compiles them out; `make test` runs them in its run without
// -race (mk/test.mk). The race run still covers the segment path through
// the run-ahead, drain, distributed and loop tests.

package training

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/learner"
)

// TestRestoredRunNeitherRestartsNorDrifts is issue 10's "resume means the
// whole state" through the run path (RLlib restores that reset timestep
// counters, start again from iteration 1, or drift): a run interrupted at
// iteration k (its segment ends with a checkpoint in S3, its node is gone)
// is resumed by another runner from S3; its metrics curve continues from
// k+1 with iteration and timestep counters strictly increasing, and it is
// the uninterrupted run's curve bit for bit (timing fields aside).
func TestRestoredRunNeitherRestartsNorDrifts(t *testing.T) {
	const k, m = 3, 7
	f := newFixture(t)
	ctx := context.Background()
	spec := Spec{Cluster: "lab", Env: "CartPole-v1", Seed: 5, Workers: 1, Iterations: m, CheckpointEvery: 100}.WithDefaults()

	straight, err := f.runner().RunSegment(ctx, SegmentInput{RunID: "straight", Spec: spec, EnvPlugin: f.cartpol, Iterations: m}, nil)
	if err != nil || straight.Iteration != m || len(straight.Metrics) != m {
		t.Fatalf("uninterrupted run: %+v %v", straight, err)
	}

	// Interrupted at k: node A checkpoints and is gone.
	in := SegmentInput{RunID: "interrupted", Spec: spec, EnvPlugin: f.cartpol, Iterations: k}
	first, err := f.runner().RunSegment(ctx, in, nil)
	if err != nil || first.Iteration != k || first.Checkpoint == 0 || first.Done {
		t.Fatalf("segment to iteration %d: %+v %v", k, first, err)
	}
	// Node B knows only the checkpoint: it restores from S3.
	in.FromCheckpoint, in.Iterations = first.Checkpoint, m
	rest, err := f.runner().RunSegment(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rest.RestoredFrom != first.Checkpoint || len(rest.Metrics) != m-k || rest.Metrics[0].Iteration != k+1 || rest.Iteration != m || !rest.Done {
		t.Fatalf("resumed segment: restored from %d, %d iterations from %d to %d, done %v",
			rest.RestoredFrom, len(rest.Metrics), rest.Metrics[0].Iteration, rest.Iteration, rest.Done)
	}

	// The curve continues from k: counters strictly increasing, no reset,
	// and every iteration as the uninterrupted run had it (the checkpoint
	// holds the envs' own state: the resumed episodes are the same ones).
	curve := append(append([]learner.Metrics(nil), first.Metrics...), rest.Metrics...)
	for i, got := range curve {
		if got.Iteration != int64(i+1) || i > 0 && got.Timesteps <= curve[i-1].Timesteps {
			t.Fatalf("iteration %d: counters (%d, %d) after (%d, %d)", i+1, got.Iteration, got.Timesteps, curve[max(i-1, 0)].Iteration, curve[max(i-1, 0)].Timesteps)
		}
	}
	if got, want := learning(curve), learning(straight.Metrics); !reflect.DeepEqual(got, want) {
		t.Fatalf("the resumed curve differs from the uninterrupted run's:\n resumed  %+v\n straight %+v", got, want)
	}
	if rest.Timesteps != straight.Timesteps {
		t.Fatalf("timesteps at iteration %d: resumed %d, uninterrupted %d", m, rest.Timesteps, straight.Timesteps)
	}
	t.Logf("interrupted at iteration %d (checkpoint %d), resumed from S3: iterations %d..%d, timesteps %d → %d",
		k, first.Checkpoint, rest.Metrics[0].Iteration, rest.Iteration, first.Timesteps, rest.Timesteps)
}

// TestCheckpointOfOtherPluginsIsRefused is issue 10's "restore verifies
// the plugin hashes": resuming a run whose checkpoint was made with other
// env plugin bytes (the weights would silently mean something else) fails
// at once, not retryable, naming the checkpoint and both hashes.
func TestCheckpointOfOtherPluginsIsRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	spec := Spec{Cluster: "lab", Env: "CartPole-v1", Seed: 1, Iterations: 10, CheckpointEvery: 2}.WithDefaults()
	in := SegmentInput{RunID: "run-a", Spec: spec, EnvPlugin: f.cartpol, Iterations: 2}
	seg, err := f.runner().RunSegment(ctx, in, nil)
	if err != nil || seg.Checkpoint == 0 {
		t.Fatalf("first segment: %+v %v", seg, err)
	}
	bad := in
	bad.EnvPlugin, bad.FromCheckpoint = f.other, seg.Checkpoint
	_, err = f.runner().RunSegment(ctx, bad, nil)
	if !errors.Is(err, ErrFatal) {
		t.Fatalf("resume with other plugin bytes: %v, want ErrFatal", err)
	}
	for _, want := range []string{"checkpoint 1 was made with env plugin " + f.cartpol[:12], "this run uses " + f.other[:12]} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal %q does not say %q", err, want)
		}
	}
	t.Logf("refused: %v", err)
	// The checkpoint is untouched: the right plugin still resumes it.
	in.FromCheckpoint = seg.Checkpoint
	if ok, err := f.runner().RunSegment(ctx, in, nil); err != nil || ok.RestoredFrom != seg.Checkpoint || ok.Metrics[0].Iteration != 3 {
		t.Fatalf("resume with the right plugin after the refusal: %+v %v", ok, err)
	}
}

// TestSegmentsCheckpointAndResumeElsewhere: segments continue in memory on
// one node; a second runner (another node, or the same one after a crash)
// resumes from the newest checkpoint with counters continuing; a segment
// that checkpointed but never reported hands its metrics on.
func TestSegmentsCheckpointAndResumeElsewhere(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	spec := Spec{Cluster: "lab", Env: "CartPole-v1", Seed: 1, Iterations: 100, CheckpointEvery: 2}.WithDefaults()
	in := SegmentInput{RunID: "run-a", Spec: spec, EnvPlugin: f.cartpol, Iterations: 2}

	nodeA := f.runner()
	beats := 0
	s1, err := nodeA.RunSegment(ctx, in, func(learner.Metrics) { beats++ })
	if err != nil {
		t.Fatal(err)
	}
	if s1.Checkpoint != 1 || s1.Iteration != 2 || len(s1.Metrics) != 2 || beats != 2 || s1.RestoredFrom != 0 {
		t.Fatalf("first segment: %+v (beats %d)", s1, beats)
	}
	in.FromCheckpoint = s1.Checkpoint
	s2, err := nodeA.RunSegment(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Checkpoint != 2 || s2.Iteration != 4 || s2.RestoredFrom != 0 || s2.Metrics[0].Iteration != 3 {
		t.Fatalf("second segment should continue in memory: %+v", s2)
	}

	// Node A checkpoints a third segment but its report is lost.
	in.FromCheckpoint = s2.Checkpoint
	lost, err := nodeA.RunSegment(ctx, in, nil)
	if err != nil || lost.Checkpoint != 3 {
		t.Fatalf("lost segment: %+v %v", lost, err)
	}

	// Node B only knows checkpoint 2: it restores 3 and reports 5 and 6 too.
	nodeB := f.runner()
	s3, err := nodeB.RunSegment(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s3.RestoredFrom != 3 || s3.Checkpoint != 4 || s3.Iteration != 8 || len(s3.Metrics) != 4 ||
		s3.Metrics[0].Iteration != 5 || s3.Metrics[3].Iteration != 8 || s3.Metrics[3].Timesteps != s3.Timesteps {
		t.Fatalf("resume elsewhere: %+v", s3)
	}
	// Node A's cached learner is stale (it follows checkpoint 3, not 4):
	// it must restore rather than continue.
	in.FromCheckpoint = s3.Checkpoint
	s4, err := nodeA.RunSegment(ctx, in, nil)
	if err != nil || s4.RestoredFrom != 4 || s4.Metrics[0].Iteration != 9 {
		t.Fatalf("stale cache: %+v %v", s4, err)
	}

	// (A checkpoint made with other plugin bytes: TestCheckpointOfOtherPluginsIsRefused.)

	// The stop condition ends the run with an evaluation.
	done := SegmentInput{RunID: "run-b", EnvPlugin: f.cartpol, Iterations: 10,
		Spec: Spec{Cluster: "lab", Env: "CartPole-v1", Seed: 2, Iterations: 3}.WithDefaults()}
	fin, err := f.runner().RunSegment(ctx, done, nil)
	if err != nil || !fin.Done || fin.Iteration != 3 || fin.Eval == nil || fin.Eval.Episodes == 0 {
		t.Fatalf("final segment: %+v %v", fin, err)
	}
	ms, err := f.ckpts.List(ctx, "run-b")
	if err != nil || len(ms) != 1 || ms[0].Meta.Labels[LabelEnv] != f.cartpol || ms[0].Meta.Iteration != 3 {
		t.Fatalf("checkpoints of run-b: %+v %v", ms, err)
	}
}

// TestLateSegmentIsFenced (issue 31): a segment whose node froze past its
// heartbeat timeout (a GC pause, SIGSTOP, a suspended VM) wakes up after
// the run moved on. Its checkpoint is refused, and the run's latest stays
// the new placement's, which the next placement resumes from.
func TestLateSegmentIsFenced(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	spec := Spec{Cluster: "lab", Env: "CartPole-v1", Seed: 5, Workers: 1, Iterations: 20, CheckpointEvery: 100}.WithDefaults()
	in := SegmentInput{RunID: "fenced", Spec: spec, EnvPlugin: f.cartpol, Iterations: 2, Epoch: 1}
	first, err := f.runner().RunSegment(ctx, in, nil)
	if err != nil || first.Checkpoint == 0 {
		t.Fatalf("placement 1: %+v %v", first, err)
	}
	// Placement 2 freezes after its second iteration, before it saves.
	in.Epoch, in.FromCheckpoint = 2, first.Checkpoint
	frozen, wake, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var late error
	frozenIn := in
	go func() {
		defer close(done)
		n := 0
		_, late = f.runner().RunSegment(ctx, frozenIn, func(learner.Metrics) {
			if n++; n == 2 {
				close(frozen)
				<-wake
			}
		})
	}()
	<-frozen
	// The run moves: placement 3 resumes from placement 1's checkpoint.
	in.Epoch = 3
	moved, err := f.runner().RunSegment(ctx, in, nil)
	if err != nil || moved.RestoredFrom != first.Checkpoint || moved.Iteration != 4 {
		t.Fatalf("placement 3: restored from %d to iteration %d, %v; want from %d to 4", moved.RestoredFrom, moved.Iteration, err, first.Checkpoint)
	}
	close(wake)
	<-done
	if !errors.Is(late, checkpoint.ErrStale) {
		t.Fatalf("the frozen placement's save: %v, want refused as stale", late)
	}
	m, err := f.ckpts.Latest(ctx, "fenced")
	if err != nil || m.Seq != moved.Checkpoint || m.Meta.Epoch != 3 {
		t.Fatalf("latest %d of placement %d, %v; want %d of placement 3", m.Seq, m.Meta.Epoch, err, moved.Checkpoint)
	}
	in.Epoch, in.FromCheckpoint = 4, moved.Checkpoint
	next, err := f.runner().RunSegment(ctx, in, nil)
	if err != nil || next.RestoredFrom != moved.Checkpoint || next.Metrics[0].Iteration != 5 {
		t.Fatalf("placement 4: restored from %d, %v; want from %d at iteration 5", next.RestoredFrom, err, moved.Checkpoint)
	}
}
