package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/provision/provisiontest"
)

type clusterStatus struct {
	Busy  bool `json:"busy"`
	Nodes []struct {
		Name       string `json:"name"`
		Health     string `json:"health"`
		Error      string `json:"error"`
		GPUsDiffer string `json:"gpus_differ"`
		Address    string `json:"address"`
		AgentPID   int    `json:"agent_pid"`
		Jobs       []string
		Resources  struct {
			GPUs []struct {
				Index int    `json:"index"`
				Model string `json:"model"`
			} `json:"gpus"`
		} `json:"resources"`
	} `json:"nodes"`
	Totals struct {
		Nodes    int     `json:"nodes"`
		CPUs     float64 `json:"cpus"`
		GPUs     int     `json:"gpus"`
		GPUsUsed int     `json:"gpus_used"`
	} `json:"totals"`
}

func (s clusterStatus) health(node string) string {
	for _, n := range s.Nodes {
		if n.Name == node {
			return n.Health
		}
	}
	return ""
}

const localSpec = `
name: lab
defaults:
  provider: local
  provisioner: {kind: local}
nodes:
  - {name: head, resources: {gpus: "0:TITAN X (Pascal):12GB"}}
  - {name: worker-1, resources: {gpus: "1:GTX 1080 Ti:11GB"}}
  - {name: worker-2, resources: {gpus: "2:GTX 1080 Ti:11GB"}}
`

// TestClusterLocalLifecycle: up with three local agents → all live with the
// right totals; kill -9 one → Dead; add a fourth while jobs run on the
// others → it registers and takes the next job; down → no agent left.
func TestClusterLocalLifecycle(t *testing.T) {
	t.Parallel()
	dev := startDev(t, t.TempDir())
	status := func() clusterStatus {
		var st clusterStatus
		if code, _, raw := dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st); code != 200 {
			t.Fatalf("status: %d %s", code, raw)
		}
		return st
	}
	live := func(h string) bool { return h == "Healthy" || h == "Idle" }

	// Bad specs are refused with the node and the cause, and start nothing.
	code, hdr, raw := dev.callRaw("POST", "/v1/clusters", dev.admin, "application/yaml",
		"name: lab\nnodes:\n  - {name: a, provisioner: {kind: slurm}}\n  - {name: a, provisioner: {kind: local}}\n")
	assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, "")
	for _, want := range []string{`node \"a\"`, "slurm", "duplicate"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("bad spec error lacks %q: %s", want, raw)
		}
	}

	out := cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", localSpec), "--heartbeat-timeout", "5s")
	if !strings.Contains(out, "TOTAL (3 nodes") {
		t.Fatalf("cluster up output: %s", out)
	}
	st := status()
	if st.Totals.Nodes != 3 || st.Totals.GPUs != 3 || st.Totals.CPUs <= 0 {
		t.Fatalf("totals: %+v", st.Totals)
	}
	pids := map[string]int{}
	for _, n := range st.Nodes {
		if !live(n.Health) || n.AgentPID == 0 || len(n.Resources.GPUs) != 1 {
			t.Fatalf("node %s after up: %+v", n.Name, n)
		}
		pids[n.Name] = n.AgentPID
	}
	// up again is a no-op: same agents.
	cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", localSpec))
	for _, n := range status().Nodes {
		if n.AgentPID != pids[n.Name] {
			t.Fatalf("second up restarted %s (pid %d → %d)", n.Name, pids[n.Name], n.AgentPID)
		}
	}

	// kill -9 one agent: it turns Dead.
	if err := syscall.Kill(pids["worker-2"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return status().health("worker-2") == "Dead" })

	// Long jobs on the two live nodes, one GPU each.
	var jobs []string
	for range 2 {
		jobs = append(jobs, submitJob(t, dev, []string{"sh", "-c", "echo gpu=$CUDA_VISIBLE_DEVICES; sleep 15"}, 1))
	}
	waitFor(t, func() bool {
		s := status()
		return s.Totals.GPUsUsed == 2
	})
	// A third GPU job waits, and says why.
	waiting := submitJob(t, dev, []string{"sh", "-c", "echo gpu=$CUDA_VISIBLE_DEVICES"}, 1)
	var lastReason string
	waitFor(t, func() bool {
		j := getJob(t, dev, waiting)
		lastReason = j.Progress.Reason
		return j.Progress.State == "waiting" && strings.Contains(j.Progress.Reason, "gpu")
	})
	t.Logf("waiting job says: %s", lastReason)

	// Add a fourth node while those run: it comes up and takes the job.
	node := writeFile(t, "node.yaml", `{name: worker-3, provider: local, provisioner: {kind: local}, resources: {gpus: "3:TITAN X (Pascal):12GB"}}`)
	cli(t, dev, "cluster", "nodes", "add", "lab", "-f", node)
	waitFor(t, func() bool { return live(status().health("worker-3")) })
	waitFor(t, func() bool { return getJob(t, dev, waiting).Status == "completed" })
	j := getJob(t, dev, waiting)
	if j.Result == nil || j.Result.Node != "worker-3" || !strings.Contains(j.Result.Output, "gpu=3") {
		t.Fatalf("waiting job ran as %+v", j.Result)
	}
	for _, id := range jobs {
		waitFor(t, func() bool { return getJob(t, dev, id).Status == "completed" })
		if r := getJob(t, dev, id).Result; r == nil || len(r.GPUs) != 1 || !strings.Contains(r.Output, "gpu="+itoa(r.GPUs[0])) {
			t.Fatalf("job %s: %+v", id, r)
		}
	}
	// A job no node could ever take is refused at submission, saying why.
	code, hdr, raw = dev.call("POST", "/v1/clusters/lab/jobs", dev.admin, map[string]any{"command": []string{"true"}, "gpus": 4}, nil)
	assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, "body")
	if !strings.Contains(string(raw), "infeasible even on an empty cluster") || !strings.Contains(string(raw), "GPU") {
		t.Fatalf("4-GPU job on 1-GPU nodes: %s", raw)
	}
	pids["worker-3"] = 0
	for _, n := range status().Nodes {
		if n.Name == "worker-3" {
			pids["worker-3"] = n.AgentPID
		}
	}

	// Work on a node that dies is handed back and placed again elsewhere.
	long := submitJob(t, dev, []string{"sh", "-c", "sleep 3; echo finished"}, 1)
	var first string
	waitFor(t, func() bool {
		j := getJob(t, dev, long)
		first = j.Progress.Node
		return j.Progress.State == "running"
	})
	if err := syscall.Kill(pids[first], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return getJob(t, dev, long).Status == "completed" })
	if r := getJob(t, dev, long).Result; r == nil || r.Node == first || r.Placements != 2 || !strings.Contains(r.Output, "finished") {
		t.Fatalf("job whose node (%s) died: %+v", first, r)
	}

	// down: every agent process is gone.
	cli(t, dev, "cluster", "down", "lab")
	waitFor(t, func() bool {
		for _, pid := range pids {
			if !provisiontest.ProcessGone(pid) {
				return false
			}
		}
		return true
	})
	// The processes are gone; the cluster records each stop as its agent's
	// stop activity reports, a moment later.
	stopped := func() bool {
		for _, n := range status().Nodes {
			if n.Health != "Stopped" {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(30 * time.Second)
	for !stopped() && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	for _, n := range status().Nodes {
		if n.Health != "Stopped" {
			t.Errorf("30 s after down %s is %s", n.Name, n.Health)
		}
	}
}

type jobView struct {
	Status   string `json:"status"`
	Progress struct {
		State  string `json:"state"`
		Node   string `json:"node"`
		Reason string `json:"reason"`
	} `json:"progress"`
	Result *struct {
		Node       string `json:"node"`
		GPUs       []int  `json:"gpus"`
		Output     string `json:"output"`
		Placements int    `json:"placements"`
	} `json:"result"`
	Error string `json:"error"`
}

func submitJob(t *testing.T, dev *devProc, cmd []string, gpus int) string {
	t.Helper()
	var ref struct {
		WorkflowID string `json:"workflow_id"`
	}
	if code, _, raw := dev.call("POST", "/v1/clusters/lab/jobs", dev.admin, map[string]any{"command": cmd, "gpus": gpus, "cpus": 0.5}, &ref); code != http.StatusCreated {
		t.Fatalf("submit job: %d %s", code, raw)
	}
	return ref.WorkflowID
}

func getJob(t *testing.T, dev *devProc, id string) jobView {
	t.Helper()
	var j jobView
	if code, _, raw := dev.call("GET", "/v1/jobs/"+id, dev.admin, nil, &j); code != 200 {
		t.Fatalf("job %s: %d %s", id, code, raw)
	}
	return j
}

func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func itoa(n int) string { return strconv.Itoa(n) }
