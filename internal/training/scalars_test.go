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
	"reflect"
	"testing"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/scalars"
)

// TestCurvesSurviveLostSegments drives the run path as the Train workflow
// and its agent activity do (RunSegment, then WriteScalars with the
// segment's metrics) through a segment whose curves were written but
// whose report was lost, and one lost before its curves were written:
// the run's curves end with every iteration exactly once, each with the
// values the workflow was given.
func TestCurvesSurviveLostSegments(t *testing.T) {
	for _, tc := range []struct {
		name        string
		lostWritten bool // the lost segment wrote its curves before it was lost
	}{
		{"curves written, report lost", true},
		{"lost before its curves", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			run := "run-curves-" + map[bool]string{true: "written", false: "unwritten"}[tc.lostWritten]
			spec := Spec{Cluster: "lab", Env: "CartPole-v1", Seed: 2, Iterations: 9, CheckpointEvery: 3}.WithDefaults()
			in := SegmentInput{RunID: run, Spec: spec, EnvPlugin: f.cartpol, Iterations: 3}
			var reported []learner.Metrics // what the workflow saw
			segment := func(r *Runner) SegmentResult {
				t.Helper()
				stamps := &Stamps{}
				res, err := r.RunSegment(ctx, in, stamps.Saw)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.WriteScalars(ctx, run, res.Metrics, stamps); err != nil {
					t.Fatal(err)
				}
				return res
			}
			nodeA, nodeB := f.runner(), f.runner()
			nodeA.Objects, nodeB.Objects = bucket, bucket
			s1 := segment(nodeA)
			reported = append(reported, s1.Metrics...)
			in.FromCheckpoint = s1.Checkpoint
			if tc.lostWritten {
				segment(nodeA) // iterations 4..6: checkpointed and curves written, never reported
			} else if _, err := nodeA.RunSegment(ctx, in, nil); err != nil {
				t.Fatal(err)
			}
			s2 := segment(nodeB) // restores 6, hands 4..6 on, trains 7..9
			if len(s2.Metrics) != 6 || s2.Metrics[0].Iteration != 4 {
				t.Fatalf("resumed segment reported %d iterations from %d", len(s2.Metrics), s2.Metrics[0].Iteration)
			}
			reported = append(reported, s2.Metrics...)

			got, err := scalars.Log{Store: bucket, Prefix: scalars.RunPrefix(run)}.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := MetricSteps(reported, nil)
			if len(got) != len(want) {
				t.Fatalf("%d steps in the curves, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i].Step != want[i].Step || !reflect.DeepEqual(got[i].Values, want[i].Values) || got[i].WallTime == 0 {
					t.Fatalf("step %d: %+v, want %+v", i+1, got[i], want[i])
				}
			}
		})
	}
}
