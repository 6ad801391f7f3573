package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/internal/plugintest"
)

// twoNodeSpec: two CPU-only local agents, so a run can move when one dies.
const twoNodeSpec = `
name: lab
defaults:
  provider: local
  provisioner: {kind: local}
nodes:
  - {name: node-a}
  - {name: node-b}
`

type runView struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  string `json:"error"`
	Spec   struct {
		Iterations int `json:"iterations"`
	} `json:"spec"`
	Progress struct {
		State      string  `json:"state"`
		Reason     string  `json:"reason"`
		Node       string  `json:"node"`
		Placements int     `json:"placements"`
		Failures   int     `json:"failures"`
		Iteration  int64   `json:"iteration"`
		Timesteps  int64   `json:"timesteps"`
		Checkpoint int64   `json:"checkpoint"`
		MeanReturn float64 `json:"mean_return"`
		Drains     int     `json:"drains"`
		Output     string  `json:"output"`
		Restores   []struct {
			Checkpoint int64  `json:"checkpoint"`
			Iteration  int64  `json:"iteration"`
			Node       string `json:"node"`
		} `json:"restores"`
		Metrics []struct {
			Iteration        int64   `json:"iteration"`
			Timesteps        int64   `json:"timesteps"`
			RecentReturnMean float64 `json:"recent_return_mean"`
		} `json:"metrics"`
		Eval *struct {
			Episodes   int     `json:"episodes"`
			ReturnMean float64 `json:"return_mean"`
		} `json:"eval"`
	} `json:"progress"`
	Live *struct {
		Iteration int64 `json:"iteration"`
	} `json:"live"`
}

func getRun(t testing.TB, dev *devProc, id string) runView {
	t.Helper()
	var r runView
	if code, _, raw := dev.call("GET", "/v1/runs/"+id, dev.admin, nil, &r); code != 200 {
		t.Fatalf("get run %s: %d %s", id, code, raw)
	}
	return r
}

// waitRun polls until cond holds, failing with the run's state after limit.
func waitRun(t testing.TB, dev *devProc, id string, limit time.Duration, cond func(runView) bool) runView {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		r := getRun(t, dev, id)
		if cond(r) {
			return r
		}
		if r.Status != "running" {
			t.Fatalf("run %s ended %s before the awaited state: %s (state %s: %s)", id, r.Status, r.Error, r.Progress.State, r.Progress.Reason)
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s not in the awaited state after %v: %+v", id, limit, r.Progress)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// assertLearned: the run reached CartPole's 475 (assertReached: its own
// target) and no completed iteration went missing across the crash
// (iterations 1..N, each once, in order).
func assertLearned(t *testing.T, r runView) { assertReached(t, r, 475) }

func assertReached(t *testing.T, r runView, target float64) {
	t.Helper()
	if r.Status != "completed" || r.Progress.State != "succeeded" {
		t.Fatalf("run %s: status %s state %s: %s %s", r.ID, r.Status, r.Progress.State, r.Error, r.Progress.Reason)
	}
	if r.Progress.MeanReturn < target {
		t.Fatalf("run %s ended at mean return %.1f, want ≥ %.0f", r.ID, r.Progress.MeanReturn, target)
	}
	assertEveryIteration(t, r)
}

// assertEveryIteration: r ended with its final evaluation and every
// iteration 1..N recorded once, in order, its steps increasing.
func assertEveryIteration(t *testing.T, r runView) {
	t.Helper()
	if r.Progress.Eval == nil || r.Progress.Eval.Episodes == 0 {
		t.Fatalf("run %s has no final evaluation", r.ID)
	}
	ms := r.Progress.Metrics
	if int64(len(ms)) != r.Progress.Iteration {
		t.Fatalf("run %s: %d iterations recorded, counter says %d", r.ID, len(ms), r.Progress.Iteration)
	}
	for i, m := range ms {
		if m.Iteration != int64(i+1) || (i > 0 && m.Timesteps <= ms[i-1].Timesteps) {
			t.Fatalf("run %s: iteration %d recorded as %d (timesteps %d): counters reset or an iteration was lost", r.ID, i+1, m.Iteration, m.Timesteps)
		}
	}
	t.Logf("run %s: %d iterations, %d steps, mean return %.1f, eval %.1f over %d episodes, %d placements, %d lost segments, restores %v",
		r.ID, r.Progress.Iteration, r.Progress.Timesteps, r.Progress.MeanReturn, r.Progress.Eval.ReturnMean, r.Progress.Eval.Episodes,
		r.Progress.Placements, r.Progress.Failures, r.Progress.Restores)
}

// TestTrainCartPoleSurvivesAgentAndControlPlaneKill is issue 6's must-show:
// CartPole PPO submitted over the API reaches mean return 475; kill -9 of
// the agent running it → the run resumes from its latest checkpoint on the
// other node and completes; kill -9 of `trainyard dev` itself in the middle
// of a second, shorter run → it completes, every iteration recorded once.
// Checkpoints are then read back through the API and a plain S3 client,
// and a corrupted chunk gives a clear checksum error.
func TestTrainCartPoleSurvivesAgentAndControlPlaneKill(t *testing.T) {
	t.Parallel()
	wasm := plugintest.BuildGo(t, "./plugins/cartpole")
	dir := t.TempDir()
	dev, restart := crashableLab(t, dir, twoNodeSpec, 2)
	var rec struct {
		ID string `json:"id"`
	}
	if code, raw := upload(t, dev, dev.admin, wasm, &rec); code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, raw)
	}
	submit := func(dev *devProc, seed int, budget string) string {
		var ref struct {
			ID string `json:"id"`
		}
		body := fmt.Sprintf(`{"cluster":"lab","env":"CartPole-v1",%s,"checkpoint_every":2,"seed":%d}`, budget, seed)
		if code, _, raw := dev.call("POST", "/v1/runs", dev.admin, body, &ref); code != http.StatusCreated {
			t.Fatalf("submit run: %d %s", code, raw)
		}
		return ref.ID
	}

	t.Run("bad specs", func(t *testing.T) {
		for _, tc := range []struct{ body, loc string }{
			{`{"cluster":"lab","env":"no-such-plugin"}`, "body.env"},
			{`{"cluster":"lab","env":"CartPole-v1","hyperparameters":{"learning_rat":0.1}}`, "body.hyperparameters.learning_rat"},
			{`{"cluster":"lab","env":"CartPole-v1","algorithm":"sarsa"}`, "body.algorithm"},
			{`{"cluster":"nope","env":"CartPole-v1"}`, ""},
		} {
			code, hdr, raw := dev.call("POST", "/v1/runs", dev.admin, tc.body, nil)
			want := http.StatusUnprocessableEntity
			if tc.loc == "" {
				want = http.StatusNotFound
			}
			assertProblem(t, code, hdr, raw, want, tc.loc)
		}
	})

	t.Run("budget spent short of the target", func(t *testing.T) {
		cmd := exec.Command(binary, "run", "train", "--cluster", "lab", "--env", "CartPole-v1", "--iterations", "2",
			"--checkpoint-every", "2", "--target-return", "10000", "--data-dir", dev.dir)
		out, err := cmd.CombinedOutput()
		last := lastLine(string(out))
		if err == nil || !strings.Contains(last, "completed: target not reached (best ") {
			t.Fatalf("followed run train: want a non-zero exit and \"target not reached\" last, got %v:\n%s", err, out)
		}
		id := strings.Fields(last)[2] // "trainyard: run ID completed: ..."
		r := getRun(t, dev, id)
		if r.Progress.State != "completed" || !strings.Contains(r.Progress.Reason, "target not reached") {
			t.Fatalf("run %s: state %s (%s), want completed: target not reached", id, r.Progress.State, r.Progress.Reason)
		}
		if show := cli(t, dev, "run", "show", id); !strings.Contains(show, "target not reached") || strings.Contains(show, "succeeded") {
			t.Fatalf("run show:\n%s", show)
		}
	})

	// 1. kill -9 the agent in the middle of the run.
	id := submit(dev, 0, `"target_return":475,"iterations":600`)
	r := waitRun(t, dev, id, 2*time.Minute, func(r runView) bool { return r.Progress.Checkpoint >= 1 && r.Progress.State == "running" })
	killedAt := r.Progress.Iteration
	victim := killRunAgent(t, dev, r)
	r = waitRun(t, dev, id, 4*time.Minute, func(r runView) bool { return r.Status != "running" })
	assertLearned(t, r)
	if r.Progress.Failures < 1 || len(r.Progress.Restores) < 1 || r.Progress.Node == victim || r.Progress.Placements < 2 {
		t.Fatalf("run after killing %s at iteration %d: want a lost segment, a restore and a new node: %+v", victim, killedAt, r.Progress)
	}
	if r.Progress.Restores[0].Checkpoint < 1 {
		t.Fatalf("restored from checkpoint %d", r.Progress.Restores[0].Checkpoint)
	}

	// The CLI sees the same run.
	if out := cli(t, dev, "run", "show", id); !strings.Contains(out, "succeeded") || !strings.Contains(out, "restored") {
		t.Fatalf("run show: %s", out)
	}
	if out := cli(t, dev, "run", "logs", id); !strings.Contains(out, "restore  from checkpoint") || !strings.Contains(out, "eval") {
		t.Fatalf("run logs: %s", out)
	}

	t.Run("checkpoints through the API and a plain S3 client", func(t *testing.T) { checkCheckpoints(t, dev, id) })

	// 2. kill -9 the whole control plane in the middle of a run. A fixed
	// budget: that a run resumed after this kill is the same run, bit for
	// bit, is TestResumeAfterKillsIsExact's; here it must complete with
	// every iteration once and no stale restore.
	id2 := submit(dev, 2, `"iterations":40`)
	before := waitRun(t, dev, id2, 2*time.Minute, func(r runView) bool { return r.Progress.Checkpoint >= 1 && r.Progress.State == "running" })
	dev.kill(syscall.SIGKILL)
	start := time.Now()
	dev2 := restart()
	r2 := waitRun(t, dev2, id2, 4*time.Minute, func(r runView) bool { return r.Status != "running" })
	if r2.Status != "completed" || r2.Progress.Iteration != 40 {
		t.Fatalf("run %s after the control plane's kill: status %s state %s at iteration %d: %s %s", id2, r2.Status, r2.Progress.State, r2.Progress.Iteration, r2.Error, r2.Progress.Reason)
	}
	assertEveryIteration(t, r2)
	// The agent outlives the control plane, so the segment in flight may
	// finish in memory; if the run was restored instead, it must be from a
	// checkpoint at least as new as the latest one seen before the kill.
	for _, rs := range r2.Progress.Restores {
		if rs.Checkpoint < before.Progress.Checkpoint {
			t.Fatalf("run %s restored from checkpoint %d after the control plane died past checkpoint %d: a stale checkpoint", id2, rs.Checkpoint, before.Progress.Checkpoint)
		}
	}
	t.Logf("control plane killed at iteration %d (checkpoint %d); restores afterwards: %v", before.Progress.Iteration, before.Progress.Checkpoint, r2.Progress.Restores)
	t.Logf("control plane restart: run completed %v after the kill", time.Since(start).Round(time.Millisecond))
	if out := cli(t, dev2, "run", "ls"); !strings.Contains(out, id) || !strings.Contains(out, id2) {
		t.Fatalf("run ls: %s", out)
	}
}

func checkCheckpoints(t *testing.T, dev *devProc, id string) {
	var list struct {
		Checkpoints []struct {
			Seq       int64    `json:"seq"`
			Iteration int64    `json:"iteration"`
			Files     []string `json:"files"`
			Manifest  string   `json:"manifest_key"`
		} `json:"checkpoints"`
	}
	if code, _, raw := dev.call("GET", "/v1/runs/"+id+"/checkpoints", dev.admin, nil, &list); code != 200 || len(list.Checkpoints) == 0 {
		t.Fatalf("checkpoints: %d %s", code, raw)
	}
	last := list.Checkpoints[len(list.Checkpoints)-1]
	code, _, viaAPI := dev.callRaw("GET", fmt.Sprintf("/v1/runs/%s/checkpoints/%d/files/learner.ckpt", id, last.Seq), dev.admin, "", "")
	if code != 200 || !bytes.HasPrefix(viaAPI, []byte("TYPPOCKP")) {
		t.Fatalf("download learner.ckpt: %d %q", code, viaAPI[:min(len(viaAPI), 200)])
	}

	// A plain S3 client: read the manifest, concatenate the chunks.
	c := s3Client(t, dev, "")
	ctx := context.Background()
	var keys []string
	for o := range c.ListObjects(ctx, dev.ep.Bucket, minio.ListObjectsOptions{Prefix: "checkpoints/runs/" + id + "/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if strings.HasSuffix(o.Key, "/manifest.json") { // beside them: fence.json
			keys = append(keys, o.Key)
		}
	}
	if len(keys) != len(list.Checkpoints) || keys[len(keys)-1] != last.Manifest {
		t.Fatalf("S3 listing %v does not match the API's %d checkpoints (last %s)", keys, len(list.Checkpoints), last.Manifest)
	}
	get := func(key string) []byte {
		obj, err := c.GetObject(ctx, dev.ep.Bucket, key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		b, err := io.ReadAll(obj)
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		return b
	}
	var man struct {
		Files []struct {
			Path   string `json:"path"`
			SHA256 string `json:"sha256"`
			Chunks []struct {
				SHA256 string `json:"sha256"`
			} `json:"chunks"`
		} `json:"files"`
	}
	if err := json.Unmarshal(get(last.Manifest), &man); err != nil {
		t.Fatal(err)
	}
	var chunkKey string
	for _, f := range man.Files {
		if f.Path != "learner.ckpt" {
			continue
		}
		var whole []byte
		for _, ch := range f.Chunks {
			chunkKey = "checkpoints/chunks/" + ch.SHA256
			whole = append(whole, get(chunkKey)...)
		}
		sum := sha256.Sum256(whole)
		if hex.EncodeToString(sum[:]) != f.SHA256 || !bytes.Equal(whole, viaAPI) {
			t.Fatalf("learner.ckpt reassembled from S3 (%d bytes) differs from the manifest's sha256 or the API's download", len(whole))
		}
	}
	if chunkKey == "" {
		t.Fatal("manifest has no learner.ckpt")
	}

	// Corrupt one chunk: the download says which file and chunk are bad.
	bad := []byte("corrupted by the test")
	if _, err := c.PutObject(ctx, dev.ep.Bucket, chunkKey, bytes.NewReader(bad), int64(len(bad)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	code, _, raw := dev.callRaw("GET", fmt.Sprintf("/v1/runs/%s/checkpoints/%d/files/learner.ckpt", id, last.Seq), dev.admin, "", "")
	if code != http.StatusInternalServerError || !strings.Contains(string(raw), "checksum mismatch") || !strings.Contains(string(raw), "learner.ckpt") {
		t.Fatalf("download of a corrupted checkpoint: %d %s", code, raw)
	}
}
