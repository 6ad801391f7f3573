package e2e

import (
	"net/http"
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
	var runRef struct {
		ID string `json:"id"`
	}
	if code, _, raw := dev.call("POST", "/v1/runs", dev.admin, map[string]any{"cluster": "lab", "algorithm": "command",
		"command": []string{"true"}, "gpus": 1, "cpus": 0.5, "infeasible_grace": "8s"}, &runRef); code != http.StatusCreated {
		t.Fatalf("submit run: %d %s", code, raw)
	}
	run := runRef.ID

	// Waiting: each says which resource blocks it on which node.
	waitFor(t, func() bool {
		j := getJob(t, dev, waiting)
		return j.Progress.State == "waiting" && strings.Contains(j.Progress.Reason, "gpu") && strings.Contains(j.Progress.Reason, "gpu-box")
	})
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
