package rolloutworker

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/inference/inferencetest"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/internal/trajpool"
	"github.com/trainyard/trainyard/internal/weightsync"
	"github.com/trainyard/trainyard/plugins/arithmetic/problem"
)

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// TestBYOTrainerLearnsPromptStyle is the seed-003 loop with a
// bring-your-own trainer: rollout workers run the arithmetic env against a
// loopback chat-completions server whose model gets problems right only
// when asked to work them out; trajectories go to a pool served over HTTP;
// examples/arithmetic/trainer/train.py, run by the agent's command runner
// (algorithm "command"), pulls batches, takes REINFORCE steps on the
// prompt-style policy and publishes them through the weight-sync
// controller (an S3 checkpoint plus a webhook to the endpoint); the
// workers sample from the newest published weights. The policy learns the
// better prompt, and trajectories carry the versions that made them.
func TestBYOTrainerLearnsPromptStyle(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("the BYO trainer example needs python3 on PATH (apt-get install python3): %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	srv := inferencetest.Start(t, "arith-1b")
	srv.Answer = func(msgs []inference.ChatMessage) string {
		q := msgs[len(msgs)-1].Content
		p, _ := problem.Parse(q)
		if strings.Contains(q, "step by step") {
			return p.Question() + "\n" + strconv.Itoa(p.Answer())
		}
		return strconv.Itoa(p.Answer() + 1) // careless when rushed
	}
	llm, err := inference.NewClient(inference.Endpoint{Name: "llm", URL: srv.URL, Model: "arith-1b", MaxConcurrency: 32,
		Type: inference.TypeWebhook, ReloadURL: srv.URL + "/admin/reload"}, inference.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}

	pool, err := trajpool.New(trajpool.Options{Name: "byo", Capacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	poolURL := serve(t, trajpool.Handler(pool, 0))

	// The rollout side's policy: logits of the newest published weights,
	// read back from S3 the way an inference server would load them.
	var logits atomic.Pointer[[2]float64]
	logits.Store(&[2]float64{})
	store := checkpoint.New(bucket, checkpoint.Options{Prefix: "byo-weights"})
	syncer := &weightsync.Syncer{Store: store, Bucket: "weights", Run: "byo-weights", Endpoints: []*inference.Client{llm}}
	var published []weightsync.Published
	var pubMu sync.Mutex
	weightsURL := serve(t, weightsync.Handler(syncer, func(p weightsync.Published) {
		m, err := store.Get(context.Background(), "byo-weights", p.Version)
		if err != nil {
			t.Error(err)
			return
		}
		dir := t.TempDir()
		if err := store.RestoreManifest(context.Background(), m, dir); err != nil {
			t.Error(err)
			return
		}
		var w struct {
			Logits [2]float64 `json:"logits"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "policy.json"))
		if err != nil || json.Unmarshal(b, &w) != nil {
			t.Errorf("published weights: %v %s", err, b)
			return
		}
		logits.Store(&w.Logits)
		pool.SetWeightVersion(p.Version)
		pubMu.Lock()
		published = append(published, p)
		pubMu.Unlock()
	}))

	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	mod, err := rt.LoadGranted(ctx, arithmetic, pluginhost.LoadOptions{Limits: pluginhost.Limits{InitTimeout: slowInit, PoolSize: 32}},
		pluginhost.Grants{HTTP: pluginhost.NewHTTPGrant("byo-run", map[string]*inference.Client{"llm": llm}, pluginhost.HTTPLimits{})})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(context.Background())

	var workers sync.WaitGroup
	workers.Go(func() {
		// Runs until the trainer is done and ctx is cancelled.
		_, _ = Run(ctx, Config{Name: "rollout-0", Module: mod, Concurrency: 32, Episodes: 1 << 20, Seed: 7, Pool: pool,
			Policy: func(e int64, obs, act []float32) {
				l := logits.Load()
				p1 := 1 / (1 + math.Exp(l[0]-l[1]))
				if rand.New(rand.NewPCG(uint64(e), 99)).Float64() < p1 {
					act[0] = 1
				}
			}})
	})

	const iterations = 12
	runner := &training.Runner{Checkpoints: checkpoint.New(bucket, checkpoint.Options{Prefix: "byo-ckpt"})}
	spec := training.Spec{Cluster: "lab", Algorithm: training.AlgorithmCommand, SyncEverySeconds: 1, Command: []string{python,
		filepath.Join(repoRoot, "plugins/arithmetic/trainer/train.py"),
		"--pool", poolURL, "--weights", weightsURL, "--iterations", strconv.Itoa(iterations), "--batch", "32"}}
	st, err := runner.RunCommand(ctx, training.CommandInput{RunID: "byo-trainer", Spec: spec, Dir: t.TempDir(), Env: os.Environ()}, nil)
	t.Logf("trainer output:\n%s", st.Output)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	pool.Close()
	workers.Wait()

	l := logits.Load()
	p1 := 1 / (1 + math.Exp(l[0]-l[1]))
	ps := pool.Stats()
	t.Logf("p(work it out) %.3f after %d publishes; pool %+v; endpoint %d completions, reloaded to v%d; trainer checkpoint %d",
		p1, len(published), ps, srv.Completed(), srv.Version(), st.Checkpoint)
	if len(published) != iterations || srv.Version() != published[len(published)-1].Version {
		t.Fatalf("%d publishes (endpoint at v%d), want %d", len(published), srv.Version(), iterations)
	}
	if p1 < 0.9 {
		t.Errorf("the policy did not learn the better prompt: p(work it out) = %.3f", p1)
	}
	if ps.Taken != iterations*32 || ps.MaxLag < 1 {
		t.Errorf("pool %+v: want %d taken and trajectories older than the trainer's weights", ps, iterations*32)
	}
	if st.Checkpoint == 0 {
		t.Error("the trainer's checkpoint dir was never synced to S3")
	}
}
