package training

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/embedded"
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/inference/inferencetest"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/internal/pythontest"
	"github.com/trainyard/trainyard/plugins/arithmetic/model"
)

// loopPolicy is what the arithmetic trainer writes (train.py).
type loopPolicy struct {
	Logit    float64          `json:"logit"`
	Step     int64            `json:"step"`
	Episodes []int64          `json:"episodes"`
	Versions map[string]int64 `json:"versions"`
}

// TestLoopTrainerAndRollouts runs a kind llm run's two agent sides in
// process: two rollout workers play the arithmetic env against a loopback
// model into the trainer's pool; the arithmetic trainer (Python, trainer
// protocol v1) learns to make the model work problems out; every step is
// published and the model reloads it. Midway the trainer and a worker are
// stopped and started again (as after their agents died): the trainer
// resumes from its last published step, the pool from that step's ledger,
// and no episode is trained on twice.
func TestLoopTrainerAndRollouts(t *testing.T) {
	ctx := t.Context()
	_, file, _, _ := runtime.Caller(0)
	trainer := filepath.Join(filepath.Dir(file), "..", "..", "plugins", "arithmetic", "trainer", "train.py")
	sha := pluginhost.SHA256(arithmeticWasm)
	run := fmt.Sprintf("loop-%d", time.Now().UnixNano())
	ck := checkpoint.New(bucket, checkpoint.Options{Prefix: "ckpt-loop"})
	srv := inferencetest.Start(t, "arith-1b")
	llm := model.New(1)
	srv.Answer = func(msgs []inference.ChatMessage) string { return llm.Answer(msgs[len(msgs)-1].Content) }
	var weights atomic.Pointer[loopPolicy]
	srv.OnReload = func(rl inferencetest.Reload) error {
		m, err := ck.Get(context.Background(), run, rl.Version)
		if err != nil {
			return err
		}
		dir := t.TempDir()
		if err := ck.RestoreManifest(context.Background(), m, dir); err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(dir, "policy.json"))
		if err != nil {
			return err
		}
		var p loopPolicy
		if err := json.Unmarshal(b, &p); err != nil {
			return err
		}
		weights.Store(&p)
		return llm.Load(b)
	}
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: plugintest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	r := &Runner{Plugins: rt, Modules: Modules{sha: arithmeticWasm}, Checkpoints: ck}
	const steps, batch = 10, 16
	spec := Spec{Kind: KindLLM, Cluster: "lab", Env: sha, RolloutWorkers: 2, Seed: 3,
		Command:      []string{pythontest.Python, trainer, "--min-step-seconds", "1"},
		Capabilities: &Capabilities{HTTP: []string{"llm"}},
		LLM:          &Loop{Steps: steps, Batch: batch, MaxConcurrency: 8, PoolCapacity: 2 * batch, SyncEvery: 1}}.WithDefaults()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	eps := []inference.Endpoint{{Name: "llm", URL: srv.URL, Model: "arith-1b", MaxConcurrency: 64, Type: inference.TypeWebhook, ReloadURL: srv.URL + "/admin/reload"}}
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pool := "http://127.0.0.1:" + strconv.Itoa(port)
	dir := t.TempDir()
	env := []string{"PATH=/usr/bin:/bin"}

	startWorker := func(ctx context.Context, w int) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := r.RunLoopRollouts(ctx, LoopRolloutInput{RunID: run, Spec: spec, EnvPlugin: sha, Endpoints: eps, Worker: w, Workers: 2, Pool: pool}, nil)
			done <- err
		}()
		return done
	}
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	w0ctx, stopW0 := context.WithCancel(wctx)
	w0 := startWorker(w0ctx, 0)
	w1 := startWorker(wctx, 1)

	in := LoopTrainerInput{RunID: run, Spec: spec, Endpoints: eps, Port: port, Dir: dir, Env: env}
	// First life: stopped once step 4 is published. A step takes at least
	// 1 s (--min-step-seconds), so the heartbeat (every 2 s) that sees it
	// comes well before step 10: at 0.3 s a run without -race finished all
	// 10 steps first, and the second life had nothing left to train.
	tctx, stopTrainer := context.WithCancel(ctx)
	var beats []LoopStatus
	var mu sync.Mutex
	first, err := r.RunLoopTrainer(tctx, in, func(st LoopStatus) {
		mu.Lock()
		beats = append(beats, st)
		mu.Unlock()
		if st.Checkpoint >= 4 {
			stopTrainer()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first life: %v\n%s", err, first.Output)
	}
	// A worker dies too, and comes back.
	stopW0()
	if err := <-w0; !errors.Is(err, context.Canceled) {
		t.Fatalf("worker 0: %v", err)
	}
	w0 = startWorker(wctx, 0)
	second, err := r.RunLoopTrainer(ctx, in, nil)
	if err != nil {
		t.Fatalf("second life: %v\n%s", err, second.Output)
	}
	stopWorkers()
	<-w0
	<-w1
	t.Logf("first life: step %d, checkpoint %d, pool %+v\nsecond life: restored %d, step %d, pool %+v, endpoints %+v\n%s",
		first.Step, first.Checkpoint, first.Pool, second.Restored, second.Step, second.Pool, second.Endpoints, second.Output)

	if second.Restored != first.Checkpoint || second.Step != steps {
		t.Fatalf("second life restored %d (first published %d) and ended at step %d", second.Restored, first.Checkpoint, second.Step)
	}
	final := weights.Load()
	if final.Step != steps || len(final.Episodes) != steps*batch {
		t.Fatalf("endpoint's weights: step %d with %d episodes, want %d and %d", final.Step, len(final.Episodes), steps, steps*batch)
	}
	seen := map[int64]bool{}
	for _, e := range final.Episodes {
		if seen[e] {
			t.Fatalf("episode %d trained on twice: %v", e, final.Episodes)
		}
		seen[e] = true
	}
	reloads := srv.Reloads()
	for i, rl := range reloads {
		if i > 0 && rl.Version <= reloads[i-1].Version {
			t.Fatalf("reloads out of order: %+v", reloads)
		}
	}
	if srv.Version() != second.Checkpoint || len(reloads) < steps {
		t.Fatalf("endpoint at v%d after %d reloads; the loop published v%d", srv.Version(), len(reloads), second.Checkpoint)
	}
	if v := second.Endpoints; len(v) != 1 || v[0].Version != second.Checkpoint {
		t.Fatalf("endpoint versions %+v", v)
	}
	var old int64
	for v, n := range final.Versions {
		if x, _ := strconv.ParseInt(v, 10, 64); x > 0 {
			old += n
		}
	}
	if old == 0 {
		t.Fatalf("no trajectory came from published weights: %v", final.Versions)
	}
	if !strings.Contains(second.Output, "TRAINYARD_STEP step=10") || final.Logit <= 0 {
		t.Fatalf("the trainer did not learn to work problems out (logit %.3f):\n%s", final.Logit, second.Output)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(beats) == 0 || !slices.ContainsFunc(beats, func(s LoopStatus) bool { return s.Pool.Put > 0 }) {
		t.Fatalf("no heartbeat showed the pool filling: %+v", beats)
	}
}
