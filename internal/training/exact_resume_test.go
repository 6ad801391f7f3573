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
	"fmt"
	"maps"
	"reflect"
	"testing"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/plugintest"
)

// learning is a run's per-iteration metrics without the timing fields.
func learning(ms []learner.Metrics) []learner.Metrics {
	out := append([]learner.Metrics(nil), ms...)
	for i := range out {
		out[i].StepsPerSecond = 0
		out[i].Values = maps.Clone(out[i].Values)
		delete(out[i].Values, "rollout_steps_per_second")
	}
	return out
}

// TestKilledRunResumesExactly is exact resume through the agent's Runner,
// as `run train --local --checkpoint-dir` runs it: a run in segments of
// checkpoint_every iterations, the learner kept in memory between them
// (with the next segment's iterations trained ahead while a checkpoint is
// written), is killed after iteration k (its Runner and everything in
// memory are dropped, as a kill -9 of the agent does) and resumed by a
// new Runner from the newest checkpoint in the directory. For every k the
// metrics of iterations 1..m, lost segments handed on included, are the
// uninterrupted run's bit for bit (timing fields aside), for plugin envs
// whose state the Go SDK saves (CartPole-v1 through single envs,
// Pendulum-v1 as the native VecEnv it registers).
func TestKilledRunResumesExactly(t *testing.T) {
	const m, every = 10, 2
	ctx := context.Background()
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: plugintest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	for _, tc := range []struct {
		env  string
		wasm []byte
	}{
		{"CartPole-v1", cartpoleWasm},
		{"Pendulum-v1", pendulumWasm},
	} {
		t.Run(tc.env, func(t *testing.T) {
			sha := pluginhost.SHA256(tc.wasm)
			spec := Spec{Cluster: "local", Env: tc.env, Seed: 3, Iterations: m, CheckpointEvery: every}.WithDefaults()
			if tc.env == "Pendulum-v1" {
				spec.EpisodeLength = 64 // short iterations; its episodes (200 steps) still span several
			}
			runner := func(t *testing.T, dir string) *Runner {
				t.Helper()
				ck, err := checkpoint.NewDir(dir, checkpoint.Options{})
				if err != nil {
					t.Fatal(err)
				}
				r := &Runner{Plugins: rt, Modules: Modules{sha: tc.wasm}, Checkpoints: ck}
				t.Cleanup(r.Close) // before rt closes
				return r
			}
			// train runs segments as the Train workflow does and kills the
			// run once, after iteration kill (0: never): mid-segment (the
			// segment in flight is lost with everything in memory, the run
			// resumes from the checkpoint before it) or right after a
			// checkpoint before the segment reported (the run resumes from
			// that checkpoint and its metrics are handed on). A new runner
			// takes over either way.
			train := func(t *testing.T, kill int64) []learner.Metrics {
				t.Helper()
				dir := t.TempDir()
				r := runner(t, dir)
				var all []learner.Metrics
				var from, it int64
				for killed := false; it < m; {
					sctx, cancel := context.WithCancel(ctx)
					var progress func(learner.Metrics)
					midSegment := !killed && kill > it && kill < it+every
					if midSegment {
						progress = func(x learner.Metrics) {
							if x.Iteration == kill {
								cancel()
							}
						}
					}
					res, err := r.RunSegment(sctx, SegmentInput{RunID: "local", Spec: spec, EnvPlugin: sha, FromCheckpoint: from, Iterations: every}, progress)
					cancel()
					switch {
					case midSegment:
						if err == nil {
							t.Fatalf("the segment killed after iteration %d ended: %+v", kill, res)
						}
						killed, r = true, runner(t, dir)
						continue
					case err != nil:
						t.Fatalf("segment from iteration %d: %v", it, err)
					case !killed && res.Iteration == kill:
						killed, r = true, runner(t, dir) // its report is lost
						continue
					}
					all = append(all, res.Metrics...)
					it, from = res.Iteration, res.Checkpoint
				}
				return learning(all)
			}
			want := train(t, 0)
			if len(want) != m {
				t.Fatalf("uninterrupted run: %d iterations", len(want))
			}
			for _, k := range []int64{1, 2, 3, 5, 8} {
				t.Run(fmt.Sprintf("killed after %d", k), func(t *testing.T) {
					got := train(t, k)
					if len(got) != m {
						t.Fatalf("%d iterations, want %d", len(got), m)
					}
					for i := range want {
						if !reflect.DeepEqual(got[i], want[i]) {
							t.Fatalf("iteration %d differs from the uninterrupted run:\n resumed  %+v\n straight %+v", i+1, got[i], want[i])
						}
					}
				})
			}
		})
	}
}
