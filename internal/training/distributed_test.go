package training

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/internal/learner"
)

// TestDistributedSegmentsWithRolloutWorkers runs a trainer and two rollout
// workers (separate Runners: separate nodes) over the real embedded S3:
// the trainer learns from both workers' fragments, checkpoints per
// segment; a worker killed mid-run and replaced by a fresh one (another
// node) costs nothing but time; a trainer restored elsewhere starts a new
// generation that the workers follow; the end tells the workers to stop
// and leaves no bus objects but the head.
func TestDistributedSegmentsWithRolloutWorkers(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	spec := Spec{Cluster: "lab", Env: "CartPole-v1", Seed: 1, Iterations: 8, CheckpointEvery: 2,
		RolloutWorkers: 2, EnvsPerWorker: 2, EpisodeLength: 16}.WithDefaults()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	run := "run-dist-" + strings.ReplaceAll(time.Now().Format("150405.000"), ".", "")
	node := func(name string) *Runner {
		r := f.runner()
		r.Objects, r.Node = bucket, name
		return r
	}
	type result struct {
		st  RolloutStatus
		err error
	}
	startWorker := func(r *Runner, w, start int) (context.CancelFunc, chan result) {
		wctx, stop := context.WithCancel(ctx)
		out := make(chan result, 1)
		go func() {
			st, err := r.RunRollouts(wctx, RolloutInput{RunID: run, Spec: spec, EnvPlugin: f.cartpol, Worker: w, Start: start}, nil)
			out <- result{st, err}
		}()
		return stop, out
	}
	_, w0 := startWorker(node("node-b"), 0, 1)
	kill1, w1 := startWorker(node("node-c"), 1, 1)

	in := SegmentInput{RunID: run, Spec: spec, EnvPlugin: f.cartpol, Iterations: spec.CheckpointEvery}
	trainerA := node("node-a")
	s1, err := trainerA.RunDistributedSegment(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s1.Iteration != 2 || s1.Checkpoint != 1 || len(s1.Metrics) != 2 {
		t.Fatalf("first segment: %+v", s1)
	}
	m := s1.Metrics[1]
	if len(m.Rollouts) != 2 || m.Rollouts[0].Node != "node-b" || m.Rollouts[1].Node != "node-c" || m.Rollouts[0].WeightVersion != 1 ||
		m.Timesteps != int64(2*2*2*16) {
		t.Fatalf("iteration 2 rollouts: %+v", m)
	}

	// Worker 1's node dies; its replacement on node-d takes over.
	kill1()
	if r := <-w1; !errors.Is(r.err, context.Canceled) || r.st.Fragments < 2 {
		t.Fatalf("killed worker: %+v", r)
	}
	_, w1 = startWorker(node("node-d"), 1, 2)
	in.FromCheckpoint = s1.Checkpoint
	s2, err := trainerA.RunDistributedSegment(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Iteration != 4 || s2.RestoredFrom != 0 || s2.Metrics[1].Rollouts[1].Node != "node-d" {
		t.Fatalf("segment after the worker's replacement: %+v", s2)
	}

	// The trainer moves to node-e (its node died after checkpoint 2): a new
	// generation, restored from the checkpoint; the workers follow it.
	in.FromCheckpoint = s2.Checkpoint
	s3, err := node("node-e").RunDistributedSegment(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s3.RestoredFrom != 2 || s3.Iteration != 6 || s3.Metrics[0].Iteration != 5 || s3.Metrics[0].Rollouts[0].WeightVersion != 4 {
		t.Fatalf("trainer elsewhere: %+v", s3)
	}
	in.FromCheckpoint = s3.Checkpoint
	in.Iterations = 10
	fin, err := node("node-e").RunDistributedSegment(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !fin.Done || fin.Iteration != 8 || fin.Eval == nil {
		t.Fatalf("final segment: %+v", fin)
	}
	var wg sync.WaitGroup
	for _, ch := range []chan result{w0, w1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case r := <-ch:
				if r.err != nil {
					t.Errorf("worker did not end cleanly: %v", r.err)
				}
			case <-time.After(30 * time.Second):
				t.Error("worker still running after the run ended")
			}
		}()
	}
	wg.Wait()
	var left []string
	for o := range bucket.Client.ListObjects(ctx, bucket.Bucket, minio.ListObjectsOptions{Prefix: "runs/" + run + "/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		left = append(left, o.Key)
	}
	if len(left) != 1 || left[0] != HeadKey(run) {
		t.Fatalf("bus objects left after the run: %v", left)
	}
	_ = learner.Metrics{}
}

func TestSpecRolloutWorkers(t *testing.T) {
	s := Spec{Cluster: "lab", Env: "x", RolloutWorkers: 3, EnvsPerWorker: 4}.WithDefaults()
	if err := s.Validate(); err != nil || s.RolloutCPUs != 1 || s.LearnerEnvs() != 12 || !s.Distributed() {
		t.Fatalf("%+v %v", s, err)
	}
	ws := s.WorkSpec("run-x")
	if len(ws.Roles) != 2 || ws.Roles[1].Count != 3 || ws.Roles[1].GPUs != 0 {
		t.Fatalf("work spec: %+v", ws.Roles)
	}
	for _, bad := range []Spec{
		{Cluster: "lab", Env: "x", RolloutWorkers: 65},
		{Cluster: "lab", Env: "x", RolloutWorkers: -1},
		{Cluster: "lab", Env: "x", RolloutWorkers: 1, RolloutCPUs: -1},
		{Cluster: "lab", Algorithm: AlgorithmCommand, Command: []string{"x"}, RolloutWorkers: 1},
	} {
		var fe *FieldError
		if err := bad.WithDefaults().Validate(); !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "rollout_") {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
	if (Spec{Workers: 2, EnvsPerWorker: 3}).LearnerEnvs() != 6 {
		t.Fatal("in-process env count changed")
	}
}

// TestGatherLeavesStaleFragments: a fragment of another trainer session is
// skipped, not removed, and the trainer takes the one its worker writes
// over it. Removing it raced that write (read stale, worker writes, remove:
// the trainer then waited forever; seen once in make test's race run).
func TestGatherLeavesStaleFragments(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := "run-stale-" + strings.ReplaceAll(time.Now().Format("150405.000"), ".", "")
	frag := func(gen string) []byte {
		return sealBus(busStamp{Generation: gen, Version: 6}, []byte(gen))
	}
	key := FragmentKey(run, 7, 0)
	if err := putObject(ctx, bucket, key, frag("old-session")); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Objects: bucket}
	got := make(chan [][]byte, 1)
	go func() {
		fs, err := r.gather(ctx, bucket, run, "new-session", 6, 1)
		if err != nil && ctx.Err() == nil {
			t.Error(err)
		}
		got <- fs
	}()
	time.Sleep(10 * busPoll)
	if _, err := bucket.Client.StatObject(ctx, bucket.Bucket, key, minio.StatObjectOptions{}); err != nil {
		cancel()
		<-got
		t.Fatalf("the stale fragment is gone (%v): a worker's write over it could have gone with it", err)
	}
	if err := putObject(ctx, bucket, key, frag("new-session")); err != nil {
		t.Fatal(err)
	}
	if fs := <-got; len(fs) != 1 || string(fs[0]) != "new-session" {
		t.Fatalf("gathered %+v, want the new session's fragment", fs)
	}
}
