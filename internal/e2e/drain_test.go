package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trainyard/trainyard/plugins/plugintest"
)

// spotMetadata serves AWS's spot instance-action protocol (IMDSv2) per node
// under /<node>: 404 until the test gives that node a notice.
type spotMetadata struct {
	mu      sync.Mutex
	noticed map[string]bool
}

func (m *spotMetadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	node, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPut && rest == "latest/api/token":
		io.WriteString(w, "token")
	case rest == "latest/meta-data/spot/instance-action" && r.Header.Get("X-aws-ec2-metadata-token") == "token":
		m.mu.Lock()
		noticed := m.noticed[node]
		m.mu.Unlock()
		if !noticed {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"action":"terminate","time":%q}`, time.Now().Add(2*time.Minute).UTC().Format(time.RFC3339))
	default:
		http.Error(w, "", http.StatusUnauthorized)
	}
}

// TestDrainLosesNoIterations is issue 10's "use the preemption notice": a
// run on a node that is drained through the API, that gets a spot
// preemption notice, or whose agent gets SIGTERM, checkpoints the iteration
// it is on and moves; none is a lost segment, and each resumes from at
// least the iteration it was seen at just before (a kill -9 would resume
// from the last periodic checkpoint, up to checkpoint_every back).
func TestDrainLosesNoIterations(t *testing.T) {
	wasm := plugintest.BuildGo(t, "./plugins/examples/cartpole")
	meta := &spotMetadata{noticed: map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: meta}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	dir := t.TempDir()
	dev := startDev(t, dir)
	spec := fmt.Sprintf(`
name: lab
defaults:
  provider: local
  provisioner: {kind: local}
nodes:
  - {name: node-a, preemption_notice: "aws:http://%[1]s/node-a"}
  - {name: node-b, preemption_notice: "aws:http://%[1]s/node-b"}
  - {name: node-c, preemption_notice: "aws:http://%[1]s/node-c"}
`, ln.Addr())
	if out := cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", spec)); !strings.Contains(out, "TOTAL (3 nodes") {
		t.Fatalf("cluster up: %s", out)
	}
	t.Cleanup(func() { killAgentsOf(dir) })
	if code, raw := upload(t, dev, dev.admin, wasm, nil); code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, raw)
	}
	var ref struct {
		ID string `json:"id"`
	}
	const every = 50
	body := fmt.Sprintf(`{"cluster":"lab","env":"CartPole-v1","iterations":2000,"checkpoint_every":%d,"seed":3}`, every)
	if code, _, raw := dev.call("POST", "/v1/runs", dev.admin, body, &ref); code != http.StatusCreated {
		t.Fatalf("submit run: %d %s", code, raw)
	}
	id := ref.ID

	last := int64(0)
	move := func(how string, trigger func(node string)) string {
		r := waitRun(t, dev, id, 2*time.Minute, func(r runView) bool {
			return r.Progress.State == "running" && r.Live != nil && r.Live.Iteration >= last+3
		})
		node, seen, drains := r.Progress.Node, r.Live.Iteration, r.Progress.Drains
		trigger(node)
		r = waitRun(t, dev, id, 2*time.Minute, func(r runView) bool {
			return r.Progress.Drains > drains && len(r.Progress.Restores) > drains && r.Progress.State == "running"
		})
		rs := r.Progress.Restores[len(r.Progress.Restores)-1]
		if r.Progress.Failures != 0 || rs.Node == node || rs.Iteration < seen {
			t.Fatalf("%s on %s at iteration %d: want a move with nothing redone, got restore %+v, failures %d, reason %q",
				how, node, seen, rs, r.Progress.Failures, r.Progress.Reason)
		}
		t.Logf("%s: %s seen at iteration %d, resumed on %s from iteration %d (0 lost; a kill -9 would have resumed from iteration %d)",
			how, node, seen, rs.Node, rs.Iteration, seen/every*every)
		last = rs.Iteration
		return node
	}

	drained := move("drain request", func(node string) {
		cli(t, dev, "cluster", "nodes", "drain", "lab", node, "--deadline", "30s")
	})
	if out := cli(t, dev, "cluster", "status", "lab"); !strings.Contains(out, "draining: drain requested") {
		t.Fatalf("status of a drained node: %s", out)
	}
	cli(t, dev, "cluster", "nodes", "undrain", "lab", drained)

	move("spot preemption notice", func(node string) {
		meta.mu.Lock()
		meta.noticed[node] = true
		meta.mu.Unlock()
	})

	move("SIGTERM", func(node string) {
		var st clusterStatus
		dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st)
		for _, n := range st.Nodes {
			if n.Name == node {
				if err := syscall.Kill(n.AgentPID, syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		t.Fatalf("no agent pid for %s", node)
	})

	if code, _, raw := dev.call("POST", "/v1/runs/"+id+"/cancel", dev.admin, nil, nil); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, raw)
	}
	r := waitRun(t, dev, id, time.Minute, func(r runView) bool { return r.Status != "running" })
	if r.Progress.Drains != 3 || r.Progress.Failures != 0 {
		t.Fatalf("after three drains: %+v", r.Progress)
	}
	// Bad input: an unknown node is a 404, a bad deadline a 422 naming it.
	code, hdr, raw := dev.call("POST", "/v1/clusters/lab/nodes/nope/drain", dev.admin, nil, nil)
	assertProblem(t, code, hdr, raw, http.StatusNotFound, "")
	code, hdr, raw = dev.call("POST", "/v1/clusters/lab/nodes/node-a/drain?deadline=soon", dev.admin, nil, nil)
	assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, "query.deadline")
}
