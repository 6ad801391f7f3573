package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWaitingWorkNeverPendsSilently is issue 10's "nothing waits without a
// reason" (Ray's placement groups stay PENDING forever, silently): a job
// and a run waiting for the cluster's one GPU say why, in their own
// views, the CLI and the cluster's queue (with what they wait behind);
// when the GPU node leaves they turn infeasible, say until when, and fail
// at the end of their grace period naming the constraint.
func TestWaitingWorkNeverPendsSilently(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dev := startDev(t, dir)
	spec := `
name: lab
defaults:
  provider: local
  provisioner: {kind: local}
nodes:
  - {name: gpu-box, resources: {gpus: "0:GTX 1080 Ti:11GB"}}
  - {name: cpu-box}
`
	if out := cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", spec)); !strings.Contains(out, "TOTAL (2 nodes") {
		t.Fatalf("cluster up: %s", out)
	}
	t.Cleanup(func() { killAgentsOf(dir) })

	holder := submitJob(t, dev, []string{"sleep", "120"}, 1)
	waitFor(t, func() bool { return getJob(t, dev, holder).Progress.State == "running" })

	var jobRef struct {
		WorkflowID string `json:"workflow_id"`
	}
	if code, _, raw := dev.call("POST", "/v1/clusters/lab/jobs", dev.admin,
		map[string]any{"command": []string{"true"}, "gpus": 1, "cpus": 0.5, "infeasible_grace": "8s"}, &jobRef); code != http.StatusCreated {
		t.Fatalf("submit job: %d %s", code, raw)
	}
	waiting := jobRef.WorkflowID
	// The job waits in the queue before the run is submitted: two
	// workflows' requests reach the cluster in no set order otherwise (on
	// a loaded machine the run's came first).
	waitFor(t, func() bool {
		j := getJob(t, dev, waiting)
		return j.Progress.State == "waiting" && strings.Contains(j.Progress.Reason, "gpu") && strings.Contains(j.Progress.Reason, "gpu-box")
	})
	var runRef struct {
		ID string `json:"id"`
	}
	if code, _, raw := dev.call("POST", "/v1/runs", dev.admin, map[string]any{"cluster": "lab", "algorithm": "command",
		"command": []string{"true"}, "gpus": 1, "cpus": 0.5, "infeasible_grace": "8s"}, &runRef); code != http.StatusCreated {
		t.Fatalf("submit run: %d %s", code, raw)
	}
	run := runRef.ID

	// Waiting: each says which resource blocks it on which node.
	r := waitRun(t, dev, run, time.Minute, func(r runView) bool {
		return r.Progress.State == "waiting" && strings.Contains(r.Progress.Reason, "gpu")
	})
	t.Logf("waiting run says: %s", r.Progress.Reason)
	if out := cli(t, dev, "run", "show", run); !strings.Contains(out, "waiting") || !strings.Contains(out, r.Progress.Reason[:20]) {
		t.Errorf("run show of a waiting run:\n%s", out)
	}
	var q struct {
		Waiting []struct {
			Position int      `json:"position"`
			ID       string   `json:"id"`
			Kind     string   `json:"kind"`
			State    string   `json:"state"`
			Reason   string   `json:"reason"`
			Running  []string `json:"running"`
		} `json:"waiting"`
		Running int `json:"running"`
	}
	if code, _, raw := dev.call("GET", "/v1/clusters/lab/queue", dev.admin, nil, &q); code != http.StatusOK {
		t.Fatalf("queue: %d %s", code, raw)
	}
	if len(q.Waiting) != 2 || q.Waiting[0].ID != waiting || q.Waiting[1].ID != run || q.Waiting[1].Kind != "run" ||
		q.Waiting[0].Position != 1 || q.Running != 1 || len(q.Waiting[0].Running) != 1 || q.Waiting[0].Running[0] != holder {
		t.Fatalf("queue: %+v", q)
	}
	out := cli(t, dev, "cluster", "status", "lab")
	if !strings.Contains(out, waiting) || !strings.Contains(out, "behind") || !strings.Contains(out, holder) {
		t.Errorf("cluster status does not show the queue:\n%s", out)
	}
	t.Logf("cluster status:\n%s", out)

	// The GPU node leaves: nothing could ever hold them now. They say so,
	// and until when they wait for a node that fits.
	cli(t, dev, "cluster", "nodes", "remove", "lab", "gpu-box")
	waitFor(t, func() bool {
		j := getJob(t, dev, waiting)
		return j.Progress.State == "infeasible" && strings.Contains(j.Progress.Reason, "fails at") || j.Status != "running"
	})
	r = waitRun(t, dev, run, time.Minute, func(r runView) bool {
		return r.Progress.State == "infeasible" && strings.Contains(r.Progress.Reason, "fails at") || r.Status != "running"
	})
	t.Logf("infeasible run says: %s", r.Progress.Reason)
	out = cli(t, dev, "cluster", "queue", "lab")
	if !strings.Contains(out, "infeasible") {
		t.Errorf("cluster queue after the GPU node left:\n%s", out)
	}
	t.Logf("cluster queue:\n%s", out)

	// The grace ends: both fail, naming the constraint.
	waitFor(t, func() bool { return getJob(t, dev, waiting).Status == "failed" })
	if j := getJob(t, dev, waiting); !strings.Contains(j.Error, "can ever run this job (waited 8s)") || !strings.Contains(j.Error, "GPU") {
		t.Errorf("failed job's error: %s", j.Error)
	}
	r = waitRun(t, dev, run, time.Minute, func(r runView) bool { return r.Status == "failed" })
	if !strings.Contains(r.Error, "can ever run this training run (waited 8s)") {
		t.Errorf("failed run's error: %s", r.Error)
	}
}

// TestImpossibleRunIsRefusedNotPending is issue 10's "nothing waits without
// a reason" at submission, for training runs: a run no node of the cluster
// could hold even empty is refused over the API and by `trainyard run
// train` with the constraint that makes it impossible (more GPUs than any
// node: 422 naming the GPU constraint and the nodes; more memory than any
// node: 403 naming the policy rule node_capacity), and a run an admission
// rule forbids is refused with that rule listed; none of them starts a
// run that would sit pending.
func TestImpossibleRunIsRefusedNotPending(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dev := startDev(t, dir)
	spec := `
name: lab
defaults:
  provider: local
  provisioner: {kind: local}
nodes:
  - {name: gpu-box, resources: {gpus: "0:GTX 1080 Ti:11GB"}}
  - {name: cpu-box}
`
	if out := cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", spec)); !strings.Contains(out, "TOTAL (2 nodes") {
		t.Fatalf("cluster up: %s", out)
	}
	t.Cleanup(func() { killAgentsOf(dir) })
	// trainFails runs `trainyard run train` expecting a refusal.
	trainFails := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(binary, append([]string{"run", "train", "--cluster", "lab", "--detach", "--data-dir", dev.dir}, args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("run train %v was accepted: %s", args, out)
		}
		return string(out)
	}

	// More GPUs than any node has: infeasible even on an empty cluster.
	code, hdr, raw := dev.call("POST", "/v1/runs", dev.admin, map[string]any{"cluster": "lab", "algorithm": "command",
		"command": []string{"true"}, "gpus": 2, "cpus": 0.5}, nil)
	assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, "body")
	for _, want := range []string{"can never be placed on cluster lab", "infeasible even on an empty cluster", "gpu: needs 2 GPUs", "gpu-box", "cpu-box"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("2-GPU run on 1-GPU nodes: the refusal lacks %q: %s", want, raw)
		}
	}
	t.Logf("2 GPUs: %s", raw)
	if out := trainFails("--gpus", "2", "--", "true"); !strings.Contains(out, "422") || !strings.Contains(out, "gpu: needs 2 GPUs") {
		t.Errorf("run train --gpus 2: %s", out)
	}

	// More memory than any node: the node_capacity rule names it.
	code, hdr, raw = dev.call("POST", "/v1/runs", dev.admin, map[string]any{"cluster": "lab", "algorithm": "command",
		"command": []string{"true"}, "memory_mb": 1 << 30}, nil)
	assertProblem(t, code, hdr, raw, http.StatusForbidden, "policy.node_capacity")
	if !strings.Contains(string(raw), "no node offers that") {
		t.Errorf("1 PB run: %s", raw)
	}
	t.Logf("1 PB memory: %s", raw)
	if out := trainFails("--memory-mb", "1073741824", "--", "true"); !strings.Contains(out, "403") || !strings.Contains(out, "node_capacity") {
		t.Errorf("run train --memory-mb 1073741824: %s", out)
	}

	// An admission rule that forbids training runs: the 403 lists it.
	freeze := copyDir(t, "../../policies")
	os.WriteFile(filepath.Join(freeze, "training_freeze.rego"), []byte(`package trainyard.admission

import rego.v1

# Change freeze: no new training runs (ids run-*; the bundle's own
# tests, whose training work has other ids, still pass).
deny contains {"rule": "training_freeze", "reason": "training runs are frozen for the release"} if {
	input.work.kind == "training"
	startswith(input.work.id, "run-")
}
`), 0o644)
	os.WriteFile(filepath.Join(freeze, "training_freeze_test.rego"), []byte(`package trainyard.admission_test

import rego.v1

import data.trainyard.admission

test_training_frozen if {
	d := admission.deny with input as {"work": {"id": "run-1", "kind": "training", "roles": [{"name": "trainer", "count": 1, "cpus": 1, "memory_mb": 512, "gpus": 0}]}, "cluster": {"nodes": [{"name": "n", "cpus": 4, "memory_mb": 4000}], "summary": {"shapes": [{"cpus": 4, "memory_mb": 4000}]}}}
	some v in d
	v.rule == "training_freeze"
}
`), 0o644)
	cli(t, dev, "policy", "push", freeze)
	code, hdr, raw = dev.call("POST", "/v1/runs", dev.admin, map[string]any{"cluster": "lab", "algorithm": "command", "command": []string{"true"}, "cpus": 0.5}, nil)
	assertProblem(t, code, hdr, raw, http.StatusForbidden, "policy.training_freeze")
	if !strings.Contains(string(raw), "frozen for the release") {
		t.Errorf("frozen run: %s", raw)
	}
	if out := trainFails("--cpus", "0.5", "--", "true"); !strings.Contains(out, "training_freeze") {
		t.Errorf("run train under the freeze: %s", out)
	}
	// Jobs are not training: the rule leaves them alone.
	job := submitJob(t, dev, []string{"true"}, 0)
	waitFor(t, func() bool { return getJob(t, dev, job).Status == "completed" })

	// None of the refused runs exists, so none pends.
	var runs struct {
		Runs []struct {
			ID string `json:"id"`
		} `json:"runs"`
	}
	if code, _, raw := dev.call("GET", "/v1/runs", dev.admin, nil, &runs); code != http.StatusOK || len(runs.Runs) != 0 {
		t.Fatalf("runs after six refusals: %d %s", code, raw)
	}
	var q struct {
		Waiting []any `json:"waiting"`
	}
	if code, _, raw := dev.call("GET", "/v1/clusters/lab/queue", dev.admin, nil, &q); code != http.StatusOK || len(q.Waiting) != 0 {
		t.Fatalf("queue after the refusals: %d %s", code, raw)
	}
}
