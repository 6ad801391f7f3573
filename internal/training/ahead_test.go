package training

import (
	"context"
	"maps"
	"reflect"
	"testing"

	"github.com/trainyard/trainyard/internal/learner"
)

// TestRunAheadChangesNoNumbers: while a segment's checkpoint uploads and
// the next segment is on its way, the runner trains the next segment's
// iterations in the background; the checkpoint is complete in the store
// before the segment reports it, and the metrics are bit for bit those of
// a runner that never runs ahead (one without checkpoints).
func TestRunAheadChangesNoNumbers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// A small batch (4 envs × 32 steps): what is checked is the order of
	// work, not learning, and under -race the network's arithmetic is
	// most of the test's time.
	spec := Spec{Cluster: "lab", Env: "CartPole-v1", Seed: 3, Iterations: 9, CheckpointEvery: 3, EnvsPerWorker: 4, EpisodeLength: 32}.WithDefaults()
	var want []learner.Metrics
	for _, tc := range []struct {
		name      string
		runner    *Runner
		wantAhead int // iterations trained ahead after each unfinished segment
	}{
		{"no checkpoints, no run-ahead", &Runner{Plugins: f.rt, Store: f.store}, 0},
		{"checkpoints upload while the next segment trains", f.runner(), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.runner
			in := SegmentInput{RunID: "run-ahead", Spec: spec, EnvPlugin: f.cartpol, Iterations: spec.CheckpointEvery}
			var got []learner.Metrics
			for seg := 1; ; seg++ {
				res, err := r.RunSegment(ctx, in, nil)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, res.Metrics...)
				if r.Checkpoints != nil {
					m, err := r.Checkpoints.Latest(ctx, in.RunID)
					if err != nil || m.Seq != res.Checkpoint || m.Meta.Iteration != res.Iteration {
						t.Fatalf("segment %d reports checkpoint %d at iteration %d; the store's newest: %+v, %v", seg, res.Checkpoint, res.Iteration, m.Meta, err)
					}
				}
				if res.Done {
					if s := r.take(in.RunID); s != nil {
						t.Fatalf("a finished run's learner stays in memory")
					}
					break
				}
				// Let the run-ahead finish the next segment, then look.
				s := r.take(in.RunID)
				ahead := 0
				if s.ahead != nil {
					<-s.ahead.done
					ahead = len(s.ahead.steps)
				}
				r.put(in.RunID, s)
				if ahead != tc.wantAhead {
					t.Fatalf("after segment %d: %d iterations trained ahead, want %d", seg, ahead, tc.wantAhead)
				}
				in.FromCheckpoint = res.Checkpoint
			}
			for i := range got {
				if got[i].Iteration != int64(i+1) {
					t.Fatalf("iteration %d reported as %d", i+1, got[i].Iteration)
				}
				got[i].StepsPerSecond = 0
				got[i].Values = maps.Clone(got[i].Values)
				delete(got[i].Values, "rollout_steps_per_second")
			}
			if want == nil {
				want = got
			} else if !reflect.DeepEqual(got, want) {
				t.Fatalf("metrics differ from the run without run-ahead:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}
