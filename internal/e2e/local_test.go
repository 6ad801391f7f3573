package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/plugins/builtin"
)

// timingFields are the per-iteration metrics that measure the machine, not
// the learning: everything else must match bit for bit.
var timingFields = []string{"steps_per_second", "rollout_steps_per_second"}

// runDoc is the part of `run show -o json` (api.Run) both paths print.
type runDoc struct {
	ID        string         `json:"id"`
	Status    string         `json:"status"`
	StartTime time.Time      `json:"start_time"`
	CloseTime *time.Time     `json:"close_time"`
	Spec      map[string]any `json:"spec"`
	Progress  struct {
		State      string           `json:"state"`
		Reason     string           `json:"reason"`
		Iteration  int64            `json:"iteration"`
		Timesteps  int64            `json:"timesteps"`
		Checkpoint int64            `json:"checkpoint"`
		MeanReturn float64          `json:"mean_return"`
		BestReturn float64          `json:"best_return"`
		Metrics    []map[string]any `json:"metrics"`
		Eval       map[string]any   `json:"eval"`
	} `json:"progress"`
}

// platform is a run's time outside the learner's iterations: from its
// start to its close, less what each iteration's steps_per_second says it
// took (placement, plugin load, checkpoints, the control plane's round
// trips; the final evaluation, in both).
func (d runDoc) platform() time.Duration {
	total := d.CloseTime.Sub(d.StartTime).Seconds()
	var prev float64
	for _, m := range d.Progress.Metrics {
		ts, _ := m["timesteps"].(float64)
		if sps, _ := m["steps_per_second"].(float64); sps > 0 {
			total -= (ts - prev) / sps
		}
		prev = ts
	}
	return time.Duration(total * float64(time.Second))
}

// learning is a run's numbers without the timing fields.
func (d runDoc) learning() []map[string]any {
	out := make([]map[string]any, len(d.Progress.Metrics))
	for i, m := range d.Progress.Metrics {
		out[i] = map[string]any{}
		for k, v := range m {
			out[i][k] = v
		}
		for k := range out[i] {
			for _, f := range timingFields { // policy/<name>/... too
				if k == f || strings.HasSuffix(k, "/"+f) {
					delete(out[i], k)
				}
			}
		}
	}
	return out
}

// runLocalCLI runs `trainyard run train --local -o json` with args and
// returns its document, stderr and error (an exit status ≠ 0).
func runLocalCLI(t testing.TB, args ...string) (runDoc, string, error) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"run", "train", "--local", "-o", "json"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var doc runDoc
	if jerr := json.Unmarshal(stdout.Bytes(), &doc); jerr != nil {
		t.Fatalf("run train --local %s: %v; stdout %q, stderr %s", strings.Join(args, " "), jerr, stdout.String(), stderr.String())
	}
	return doc, stderr.String(), err
}

// runOnCluster submits the same flags to dev's cluster lab and waits for
// the run to end; it returns `run show -o json`'s document.
func runOnCluster(t testing.TB, dev *devProc, limit time.Duration, args ...string) runDoc {
	t.Helper()
	id := strings.TrimSpace(cli(t, dev, append([]string{"run", "train", "--cluster", "lab", "--detach"}, args...)...))
	waitRun(t, dev, id, limit, func(r runView) bool { return r.Status != "running" })
	var doc runDoc
	if err := json.Unmarshal([]byte(cli(t, dev, "run", "show", id, "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// labDev starts dev with twoNodeSpec's cluster lab up.
func labDev(t testing.TB) *devProc {
	t.Helper()
	dir := t.TempDir()
	dev := startDev(t, dir)
	cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", twoNodeSpec))
	t.Cleanup(func() { killAgentsOf(dir) })
	return dev
}

// sameLearning fails unless the two runs learnt exactly the same numbers.
func sameLearning(t testing.TB, local, cluster runDoc) {
	t.Helper()
	for _, c := range []struct {
		what        string
		local, clus any
	}{
		{"state", local.Progress.State, cluster.Progress.State},
		{"reason", local.Progress.Reason, cluster.Progress.Reason},
		{"iteration", local.Progress.Iteration, cluster.Progress.Iteration},
		{"timesteps", local.Progress.Timesteps, cluster.Progress.Timesteps},
		{"mean return", local.Progress.MeanReturn, cluster.Progress.MeanReturn},
		{"best return", local.Progress.BestReturn, cluster.Progress.BestReturn},
		{"evaluation", local.Progress.Eval, cluster.Progress.Eval},
		{"per-iteration metrics", local.learning(), cluster.learning()},
	} {
		if !reflect.DeepEqual(c.local, c.clus) {
			l, _ := json.Marshal(c.local)
			r, _ := json.Marshal(c.clus)
			t.Fatalf("%s differs:\nlocal   %s\ncluster %s", c.what, l, r)
		}
	}
}

// TestLocalRunMatchesCluster: `run train --local` trains the same numbers
// as the same spec through `trainyard dev` on a local cluster (timing
// fields aside), prints the same document, checkpoints into a directory
// in S3's layout, and ends like the followed run train.
func TestLocalRunMatchesCluster(t *testing.T) {
	t.Parallel()
	spec := []string{"--env", "CartPole-v1", "--iterations", "6", "--checkpoint-every", "3", "--seed", "7"}
	ckpt := t.TempDir()
	local, stderr, err := runLocalCLI(t, append(spec, "--checkpoint-dir", ckpt)...)
	if err != nil {
		t.Fatalf("run train --local: %v\n%s", err, stderr)
	}
	dev := labDev(t)
	cluster := runOnCluster(t, dev, 3*time.Minute, spec...)
	sameLearning(t, local, cluster)
	delete(cluster.Spec, "cluster")
	delete(local.Spec, "cluster")
	if !reflect.DeepEqual(local.Spec, cluster.Spec) {
		t.Fatalf("spec differs:\nlocal   %v\ncluster %v", local.Spec, cluster.Spec)
	}
	if local.Status != "completed" || local.Progress.State != "succeeded" || len(local.Progress.Metrics) != 6 || local.CloseTime == nil {
		t.Fatalf("local run: status %s state %s, %d iterations", local.Status, local.Progress.State, len(local.Progress.Metrics))
	}

	// A second algorithm from the registry (internal/training/reinforce)
	// runs the same way on both paths, listed by the API and the CLI; an
	// unknown one is refused naming the field.
	if out := cli(t, dev, "run", "algorithms"); !strings.Contains(out, "reinforce") || !strings.Contains(out, "ppo") {
		t.Fatalf("run algorithms:\n%s", out)
	}
	rspec := append(slices.Clone(spec), "--algorithm", "reinforce")
	rlocal, stderr, err := runLocalCLI(t, rspec...)
	if err != nil {
		t.Fatalf("run train --local --algorithm reinforce: %v\n%s", err, stderr)
	}
	rcluster := runOnCluster(t, dev, 3*time.Minute, rspec...)
	sameLearning(t, rlocal, rcluster)
	if rcluster.Spec["algorithm"] != "reinforce" || reflect.DeepEqual(rcluster.Progress.Metrics, cluster.Progress.Metrics) {
		t.Fatalf("the reinforce run learnt what the ppo run did, or is not reinforce: %v", rcluster.Spec)
	}
	code, hdr, raw := dev.call("POST", "/v1/runs", dev.admin, `{"cluster":"lab","env":"CartPole-v1","algorithm":"sarsa"}`, nil)
	assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, "body.algorithm")

	// An off-policy algorithm (internal/dqn) too: its run's return is its
	// greedy evaluation, the same both ways; its hyper-parameters are its
	// own, checked at submission.
	// Short iterations that still train (learning starts at iteration 2)
	// and evaluate (iterations 2, 4, 6), across the checkpoint at 3.
	dspec := append(slices.Clone(spec), "--algorithm", "dqn", "--episode-length", "32",
		"--set", "learning_starts=256", "--set", "train_freq=64", "--set", "gradient_steps=16", "--set", "eval_episodes=20")
	dlocal, stderr, err := runLocalCLI(t, dspec...)
	if err != nil {
		t.Fatalf("run train --local --algorithm dqn: %v\n%s", err, stderr)
	}
	dcluster := runOnCluster(t, dev, 3*time.Minute, dspec...)
	sameLearning(t, dlocal, dcluster)
	if ms := dcluster.Progress.Metrics; len(ms) != 6 || dcluster.Progress.MeanReturn != ms[5]["eval_return_mean"] || ms[5]["epsilon"] == nil || ms[5]["q_loss"] == nil {
		t.Fatalf("dqn: mean_return %v is not its last greedy evaluation: %v", dcluster.Progress.MeanReturn, ms)
	}
	code, hdr, raw = dev.call("POST", "/v1/runs", dev.admin, `{"cluster":"lab","env":"CartPole-v1","algorithm":"dqn","hyperparameters":{"gamma":2}}`, nil)
	assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, "body.hyperparameters.gamma")
	code, hdr, raw = dev.call("POST", "/v1/runs", dev.admin, `{"cluster":"lab","env":"Pendulum-v1","algorithm":"dqn"}`, nil)
	assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, "body.env") // continuous actions

	// A multi-agent run (internal/ppo multiagent.go): the built-in IPD,
	// a trained policy against a frozen tit-for-tat script, learns to
	// cooperate (the best response at γ = 0.99), the same both ways, its
	// metrics per policy; a mapping or a batch that does not fit is
	// refused naming the field.
	mspec := []string{"--env", "PrisonersDilemma-v0", "--iterations", "50", "--checkpoint-every", "25", "--seed", "1",
		"--policy", "learner", "--policy", "tft=tit_for_tat", "--policy-map", "agent_0=learner", "--policy-map", "agent_1=tft"}
	mlocal, stderr, err := runLocalCLI(t, mspec...)
	if err != nil {
		t.Fatalf("run train --local on PrisonersDilemma-v0: %v\n%s", err, stderr)
	}
	mcluster := runOnCluster(t, dev, 3*time.Minute, mspec...)
	sameLearning(t, mlocal, mcluster)
	last := mcluster.Progress.Metrics[len(mcluster.Progress.Metrics)-1]
	if coop, _ := last["policy/learner/action_0_rate"].(float64); coop < 0.9 || last["policy/learner/policy_loss"] == nil || last["policy/tft/policy_loss"] != nil {
		t.Fatalf("against tit-for-tat the learner cooperates in %v of rounds (want ≥ 0.9), or the script trains: %v", last["policy/learner/action_0_rate"], last)
	}
	// A league: each episode, a fresh policy's opponent is drawn from the
	// learner of that run, frozen from its latest checkpoint (pinned at
	// submission), and tit-for-tat.
	champ := "champ=checkpoint:" + mcluster.ID + ":learner"
	lcluster := runOnCluster(t, dev, 3*time.Minute, "--env", "PrisonersDilemma-v0", "--iterations", "4", "--seed", "2",
		"--policy", "fresh", "--policy", champ, "--policy", "tft=tit_for_tat", "--policy-map", "agent_0=fresh", "--league", "agent_1=champ,tft")
	pinned := fmt.Sprintf("%s@%d:learner", mcluster.ID, mcluster.Progress.Checkpoint)
	if got := lcluster.Spec["policies"].(map[string]any)["champ"].(map[string]any)["checkpoint"]; lcluster.Status != "completed" || got != pinned {
		t.Fatalf("league run: %s (%s), champ's checkpoint %v, want %s", lcluster.Status, lcluster.Progress.Reason, got, pinned)
	}
	played := map[string]float64{}
	for _, m := range lcluster.Progress.Metrics {
		for _, p := range []string{"champ", "tft"} {
			n, _ := m["policy/"+p+"/episodes"].(float64)
			played[p] += n
		}
	}
	if last := lcluster.Progress.Metrics[3]; played["champ"] == 0 || played["tft"] == 0 || last["policy/champ/policy_loss"] != nil || last["policy/fresh/policy_loss"] == nil {
		t.Fatalf("league run: champ and tft must each play episodes (%v) and not train, fresh must train: %v", played, last)
	}
	for body, field := range map[string]string{
		`{"cluster":"lab","env":"PrisonersDilemma-v0","policies":{"a":{},"b":{"checkpoint":"run-nosuch"}},"policy_mapping":{"agent_0":"a","agent_1":"b"}}`:              "body.policies.b.checkpoint",
		`{"cluster":"lab","env":"PrisonersDilemma-v0","policies":{"a":{},"b":{"checkpoint":"` + cluster.ID + `"}},"policy_mapping":{"agent_0":"a","agent_1":"b"}}`:      "body.policies.b.checkpoint", // CartPole's
		`{"cluster":"lab","env":"PrisonersDilemma-v0","policies":{"a":{},"b":{"checkpoint":"` + mcluster.ID + `:tft"}},"policy_mapping":{"agent_0":"a","agent_1":"b"}}`: "body.policies.b.checkpoint", // a script
	} {
		code, hdr, raw := dev.call("POST", "/v1/runs", dev.admin, body, nil)
		assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, field)
	}

	// The cooperative game (three agents, an action mask), one policy
	// shared by all: learning starts on the cluster (a third of the way
	// from a random policy's -45.6 to the script's -2.5 in 10 iterations;
	// TestLearnSpread goes on to 0.9 in make learn).
	scluster := runOnCluster(t, dev, 3*time.Minute, "--env", "LandmarkSpread-v0", "--iterations", "10", "--seed", "1", "--envs-per-worker", "48")
	if ms := scluster.Progress.Metrics; len(ms) != 10 {
		t.Fatalf("LandmarkSpread-v0: %s after %d iterations", scluster.Status, len(ms))
	} else if r, ok := ms[9]["recent_return_mean"].(float64); !ok || r < -36 {
		t.Fatalf("LandmarkSpread-v0: return %v after 10 iterations, want ≥ -36", ms[9]["recent_return_mean"])
	}
	for body, field := range map[string]string{
		`{"cluster":"lab","env":"LandmarkSpread-v0"}`:                                                                                        "body.envs_per_worker",
		`{"cluster":"lab","env":"LandmarkSpread-v0","envs_per_worker":4,"rollout_workers":2,"rollout_cpus":1}`:                               "body.envs_per_worker",
		`{"cluster":"lab","env":"PrisonersDilemma-v0","policies":{"a":{}},"policy_mapping":{"agent_*":"ghost"}}`:                             "body.policy_mapping.agent_*",
		`{"cluster":"lab","env":"PrisonersDilemma-v0","envs_per_worker":5}`:                                                                  "body.envs_per_worker",
		`{"cluster":"lab","env":"PrisonersDilemma-v0","policies":{"a":{},"b":{}},"policy_mapping":{"*":"a"},"league":{"agent_1":["a","b"]}}`: "body.policy_mapping.*",
		`{"cluster":"lab","env":"CartPole-v1","policies":{"a":{}}}`:                                                                          "body.policies",
		`{"cluster":"lab","env":"PrisonersDilemma-v0","algorithm":"dqn"}`:                                                                    "body.env",
	} {
		code, hdr, raw := dev.call("POST", "/v1/runs", dev.admin, body, nil)
		assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, field)
	}

	// Seed 001's run: agent_0 and agent_1 each its own trained policy,
	// with rollout workers on the cluster's nodes (multiagent_distributed.go):
	// every iteration learnt from both workers' fragments, both policies'
	// numbers and the joint actions reported.
	dcluster = runOnCluster(t, dev, 3*time.Minute, "--env", "PrisonersDilemma-v0", "--iterations", "6", "--checkpoint-every", "3", "--seed", "1",
		"--policy", "agent_0", "--policy", "agent_1", "--policy-map", "agent_0=agent_0", "--policy-map", "agent_1=agent_1",
		"--rollout-workers", "2", "--rollout-cpus", "0.5", "--cpus", "0.5", "--envs-per-worker", "4")
	if ms := dcluster.Progress.Metrics; dcluster.Status != "completed" || len(ms) != 6 {
		t.Fatalf("IPD with rollout workers: %s (%s) after %d iterations", dcluster.Status, dcluster.Progress.Reason, len(ms))
	}
	for _, m := range dcluster.Progress.Metrics {
		var joint float64
		for _, k := range []string{"0_0", "0_1", "1_0", "1_1"} {
			r, _ := m["joint_action/"+k+"_rate"].(float64)
			joint += r
		}
		rs, _ := m["rollouts"].([]any)
		if len(rs) != 2 || m["policy/agent_0/policy_loss"] == nil || m["policy/agent_1/policy_loss"] == nil || math.Abs(joint-1) > 1e-9 {
			t.Fatalf("IPD with rollout workers: iteration %v learnt from %d fragments, joint rates sum %v: %v", m["iteration"], len(rs), joint, m)
		}
	}

	for _, tc := range []struct {
		name      string
		args      []string
		wantErr   string // last stderr line; "" for exit 0
		wantIter  int64
		wantCkpt  int64
		wantState string
	}{
		// The directory holds checkpoints 1 and 2 (iterations 3 and 6):
		// a run there continues from iteration 6.
		{"checkpoints in S3's layout, resumed from the newest", append(spec[:2:2], "--iterations", "9", "--checkpoint-every", "3", "--seed", "7", "--checkpoint-dir", ckpt), "", 9, 3, "succeeded"},
		{"budget short of the target", append(spec, "--target-return", "475"), "trainyard: run local completed: target not reached (best ", 6, 0, "completed"},
		{"not a plugin", []string{"--env", "NoSuchEnv", "--iterations", "1"}, "trainyard: run train --local: plugin \"NoSuchEnv\": not a built-in one", 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wantState == "" { // fails before training: no document
				out, err := exec.Command(binary, append([]string{"run", "train", "--local"}, tc.args...)...).CombinedOutput()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.HasPrefix(string(out), tc.wantErr) || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
					t.Fatalf("got %v, output %q; want exit 1 and one line starting %q", err, out, tc.wantErr)
				}
				return
			}
			doc, stderr, err := runLocalCLI(t, tc.args...)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.HasPrefix(stderr, tc.wantErr)) {
				t.Fatalf("exit %v, stderr %q; want %q", err, stderr, tc.wantErr)
			}
			if exit := (*exec.ExitError)(nil); errors.As(err, &exit) && exit.ExitCode() != 1 {
				t.Fatalf("exit status %d, want 1", exit.ExitCode())
			}
			p := doc.Progress
			if p.Iteration != tc.wantIter || p.Checkpoint != tc.wantCkpt || p.State != tc.wantState {
				t.Fatalf("iteration %d checkpoint %d state %s; want %d, %d, %s", p.Iteration, p.Checkpoint, p.State, tc.wantIter, tc.wantCkpt, tc.wantState)
			}
		})
	}
	for seq := 1; seq <= 3; seq++ {
		m := filepath.Join(ckpt, "checkpoints", "runs", "local", fmt.Sprintf("%010d", seq), "manifest.json")
		if _, err := os.Stat(m); err != nil {
			t.Fatalf("checkpoint %d: %v", seq, err)
		}
	}
}

// BenchmarkLocalVsCluster is `make bench`'s platform cost: the same fixed
// work (CartPole-v1, 150 iterations, seed 7, every other knob default)
// trained by `run train --local` and through `trainyard dev` on a local
// cluster, side by side, with identical final metrics asserted. Reported:
// each run's seconds from its start to its close (the API's start_time and
// close_time: placement, plugin load, every segment and checkpoint), their
// ratio cluster/local, and per iteration the time spent outside the
// learner's iterations (less sensitive to a shared machine's load than the
// wall times: the learner's own speed swings with it).
func BenchmarkLocalVsCluster(b *testing.B) {
	if set, err := pluginstore.Builtins(builtin.FS()); err != nil || len(set) == 0 {
		b.Skip("no built-in plugins in this build (make builtin-plugins): CartPole-v1 is one")
	}
	spec := []string{"--env", "CartPole-v1", "--iterations", "150", "--seed", "7"}
	dev := labDev(b)
	runOnCluster(b, dev, 5*time.Minute, "--env", "CartPole-v1", "--iterations", "1") // agent warm, plugin compiled
	var localS, clusterS float64
	var localP, clusterP time.Duration
	for range b.N {
		local, stderr, err := runLocalCLI(b, spec...)
		if err != nil {
			b.Fatalf("run train --local: %v\n%s", err, stderr)
		}
		cluster := runOnCluster(b, dev, 10*time.Minute, spec...)
		sameLearning(b, local, cluster)
		localS += local.CloseTime.Sub(local.StartTime).Seconds()
		clusterS += cluster.CloseTime.Sub(cluster.StartTime).Seconds()
		localP += local.platform()
		clusterP += cluster.platform()
	}
	n := float64(b.N)
	b.ReportMetric(localS/n, "local-s")
	b.ReportMetric(clusterS/n, "cluster-s")
	b.ReportMetric(localS/n/150*1000, "local-ms/iter")
	b.ReportMetric(clusterS/n/150*1000, "cluster-ms/iter")
	b.ReportMetric(localP.Seconds()/n/150*1000, "local-outside-ms/iter")
	b.ReportMetric(clusterP.Seconds()/n/150*1000, "cluster-outside-ms/iter")
	b.ReportMetric(clusterS/localS, "cluster/local")
	// The learner's own speed swings with a shared machine's load: the
	// cluster's time outside it added to the local run's learner time.
	b.ReportMetric((localS-localP.Seconds()+clusterP.Seconds())/localS, "cluster/local-same-learner")
}
