package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/agent/detect/gpudesc"
	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/provision"
	"github.com/trainyard/trainyard/internal/provision/provisiontest"
)

var fakeAgent string

func TestMain(m *testing.M) {
	// Re-executed as a control plane that starts an agent and then dies.
	if os.Getenv("LOCAL_TEST_CONTROL_PLANE") != "" {
		controlPlane()
		return
	}
	provisiontest.RunWithFakeAgent(m, &fakeAgent)
}

const wait = 15 * time.Second

func started(n int) func([]provisiontest.Record) bool {
	return func(r []provisiontest.Record) bool { return len(r) >= n }
}

func stopped(r []provisiontest.Record) bool { return len(r) > 0 && r[len(r)-1].Stopped }

func newProvisioner(t *testing.T) *Provisioner {
	p := New(t.TempDir())
	p.Grace = 5 * time.Second
	return p
}

func stopAll(t *testing.T, p *Provisioner, nodes ...spec.Node) {
	t.Cleanup(func() {
		for _, n := range nodes {
			if err := p.Stop(context.Background(), n, provision.Handle{}); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
}

// seed 004: `start_ray_cluster.sh 2` — three agents, GPUs 0, 1, 2, each
// with exactly its GPU and a minimal environment.
func TestStartThreeAgentsWithOwnGPUs(t *testing.T) {
	gpus, err := gpudesc.Parse("4xTITAN X (Pascal):12GB")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Cluster("dev", 2, gpus)
	if err != nil {
		t.Fatal(err)
	}
	p := newProvisioner(t)
	stopAll(t, p, c.Nodes...)
	t.Setenv("SLURM_JOB_ID", "leaks-if-you-see-it")
	t.Setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
	markers := t.TempDir()
	for i, n := range c.Nodes {
		marker := filepath.Join(markers, n.Name)
		h, err := p.Start(context.Background(), n, provision.AgentLaunch{
			Binary: fakeAgent,
			Args:   []string{"-marker", marker, "--", "--node", n.Name, "--gpus", n.GPUDescription()},
			Env:    map[string]string{"TRAINYARD_JOIN_SECRET": "s3cr'et with spaces"},
			Config: []byte("node: " + n.Name + "\n"),
		})
		if err != nil {
			t.Fatal(err)
		}
		if !h.Started || h.PID <= 0 || h.Node != n.Name || h.Kind != "local" {
			t.Fatalf("handle %+v", h)
		}
		recs, err := provisiontest.WaitMarker(marker, wait, started(1))
		if err != nil {
			t.Fatal(err)
		}
		r := recs[0]
		if r.PID != h.PID {
			t.Fatalf("%s: agent pid %d, handle pid %d", n.Name, r.PID, h.PID)
		}
		wantGPU := fmt.Sprint(i)
		if r.Env["CUDA_VISIBLE_DEVICES"] != wantGPU || r.Env["CUDA_DEVICE_ORDER"] != "PCI_BUS_ID" {
			t.Fatalf("%s: CUDA_VISIBLE_DEVICES=%q, want %q", n.Name, r.Env["CUDA_VISIBLE_DEVICES"], wantGPU)
		}
		if _, leaked := r.Env["SLURM_JOB_ID"]; leaked {
			t.Fatalf("%s: environment leaked SLURM_JOB_ID", n.Name)
		}
		if r.Env["TRAINYARD_JOIN_SECRET"] != "s3cr'et with spaces" || r.Env["PATH"] == "" {
			t.Fatalf("%s: env %v", n.Name, r.Env)
		}
		if r.Env[provision.EnvAgentDir] != h.Dir {
			t.Fatalf("%s: agent dir %q, handle %q", n.Name, r.Env[provision.EnvAgentDir], h.Dir)
		}
		cfg, err := os.ReadFile(r.Env[provision.EnvAgentConfig])
		if err != nil || string(cfg) != "node: "+n.Name+"\n" {
			t.Fatalf("%s: config %q, %v", n.Name, cfg, err)
		}
		wantArgs := []string{"--node", n.Name, "--gpus", fmt.Sprintf("%d:TITAN X (Pascal):12288", i)}
		if strings.Join(r.Args, "|") != strings.Join(wantArgs, "|") {
			t.Fatalf("%s: args %q, want %q", n.Name, r.Args, wantArgs)
		}
		if alive, err := p.Alive(context.Background(), n, h); err != nil || !alive {
			t.Fatalf("%s: Alive = %v, %v", n.Name, alive, err)
		}
	}
}

func TestLifecycle(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		grace   time.Duration
		stopped bool // the agent records a clean stop (it handled SIGTERM)
	}{
		{name: "stops on SIGTERM", args: nil, grace: time.Minute, stopped: true},
		{name: "SIGKILL after grace, child too", args: []string{"-ignore-term", "-child"}, grace: 300 * time.Millisecond, stopped: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvisioner(t)
			p.Grace = tt.grace
			node := spec.Node{Name: "n1", Provisioner: spec.Provisioner{Kind: Kind}}
			stopAll(t, p, node)
			marker := filepath.Join(t.TempDir(), "marker")
			launch := provision.AgentLaunch{Binary: fakeAgent, Args: append([]string{"-marker", marker}, tt.args...)}
			ctx := context.Background()

			h1, err := p.Start(ctx, node, launch)
			if err != nil {
				t.Fatal(err)
			}
			// Started twice: the second finds the first.
			h2, err := p.Start(ctx, node, launch)
			if err != nil {
				t.Fatal(err)
			}
			if !h1.Started || h2.Started || h2.PID != h1.PID {
				t.Fatalf("first %+v, second %+v", h1, h2)
			}
			recs, err := provisiontest.WaitMarker(marker, wait, started(1))
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 {
				t.Fatalf("%d agents started", len(recs))
			}
			if err := p.Stop(ctx, node, h1); err != nil {
				t.Fatal(err)
			}
			if alive, err := p.Alive(ctx, node, h1); err != nil || alive {
				t.Fatalf("after Stop: Alive = %v, %v", alive, err)
			}
			if !provisiontest.ProcessGone(h1.PID) {
				t.Fatalf("agent %d still runs", h1.PID)
			}
			if c := recs[0].Child; c != 0 && !provisiontest.ProcessGone(c) {
				t.Fatalf("agent's child %d survived", c)
			}
			recs, _ = provisiontest.ReadMarker(marker)
			if recs[0].Stopped != tt.stopped {
				t.Fatalf("clean stop recorded = %v, want %v", recs[0].Stopped, tt.stopped)
			}
			if _, err := os.Stat(filepath.Join(h1.Dir, "agent.pid")); !os.IsNotExist(err) {
				t.Fatalf("pid file left: %v", err)
			}
			// Stopping a stopped agent is fine; starting again starts anew.
			if err := p.Stop(ctx, node, h1); err != nil {
				t.Fatal(err)
			}
			h3, err := p.Start(ctx, node, launch)
			if err != nil {
				t.Fatal(err)
			}
			if !h3.Started || h3.PID == h1.PID {
				t.Fatalf("restart handle %+v", h3)
			}
		})
	}
}

func TestStartFailures(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		node   spec.Node
		launch provision.AgentLaunch
		err    []string
	}{
		{name: "agent exits at once", node: spec.Node{Name: "iron", Provisioner: spec.Provisioner{Kind: Kind}},
			launch: provision.AgentLaunch{Binary: fakeAgent, Args: []string{"-exit-now"}},
			err:    []string{`node "iron"`, "exited right after start", "refusing to start"}},
		{name: "missing binary", node: spec.Node{Name: "iron", Provisioner: spec.Provisioner{Kind: Kind}},
			launch: provision.AgentLaunch{Binary: "/nonexistent/trainyard"},
			err:    []string{`node "iron"`, "/nonexistent/trainyard"}},
		{name: "not a local node", node: spec.Node{Name: "zinc", Provisioner: spec.Provisioner{Kind: "ssh"}},
			launch: provision.AgentLaunch{Binary: fakeAgent}, err: []string{`node "zinc": provisioner is "ssh", not local`}},
		{name: "reserved variable", node: spec.Node{Name: "iron", Provisioner: spec.Provisioner{Kind: Kind}},
			launch: provision.AgentLaunch{Binary: fakeAgent, Env: map[string]string{provision.EnvAgentDir: "/x"}},
			err:    []string{`node "iron"`, "set by the provisioner"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvisioner(t)
			_, err := p.Start(ctx, tt.node, tt.launch)
			if err == nil {
				t.Fatal("Start succeeded")
			}
			for _, w := range tt.err {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tt.node.Provisioner.Kind == Kind {
				if alive, err := p.Alive(ctx, tt.node, provision.Handle{}); err != nil || alive {
					t.Fatalf("after failed start: Alive = %v, %v", alive, err)
				}
			}
		})
	}
}

// A control plane that dies (SIGKILL) right after starting an agent leaves
// it running; the next control plane finds it and starts no second copy.
func TestAgentOutlivesControlPlane(t *testing.T) {
	state := t.TempDir()
	marker := filepath.Join(t.TempDir(), "marker")
	node := spec.Node{Name: "platinum", Provisioner: spec.Provisioner{Kind: Kind}}
	p := New(state)
	stopAll(t, p, node)

	cp := exec.Command(os.Args[0], "-test.run=^$")
	cp.Env = append(os.Environ(), "LOCAL_TEST_CONTROL_PLANE="+state, "LOCAL_TEST_MARKER="+marker, "LOCAL_TEST_AGENT="+fakeAgent)
	out, err := cp.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Start(); err != nil {
		t.Fatal(err)
	}
	var h provision.Handle
	if err := json.NewDecoder(out).Decode(&h); err != nil {
		t.Fatalf("control plane: %v", err)
	}
	if err := cp.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cp.Wait()

	if alive, err := p.Alive(context.Background(), node, h); err != nil || !alive {
		t.Fatalf("agent did not survive its control plane: %v, %v", alive, err)
	}
	h2, err := p.Start(context.Background(), node, provision.AgentLaunch{Binary: fakeAgent, Args: []string{"-marker", marker}})
	if err != nil {
		t.Fatal(err)
	}
	if h2.Started || h2.PID != h.PID {
		t.Fatalf("restarted control plane: %+v, first %+v", h2, h)
	}
	recs, err := provisiontest.ReadMarker(marker)
	if err != nil || len(recs) != 1 {
		t.Fatalf("%d agent starts recorded (%v)", len(recs), err)
	}
	if err := p.Stop(context.Background(), node, h2); err != nil {
		t.Fatal(err)
	}
	if _, err := provisiontest.WaitMarker(marker, wait, stopped); err != nil {
		t.Fatal(err)
	}
}

func controlPlane() {
	p := New(os.Getenv("LOCAL_TEST_CONTROL_PLANE"))
	node := spec.Node{Name: "platinum", Provisioner: spec.Provisioner{Kind: Kind}}
	h, err := p.Start(context.Background(), node, provision.AgentLaunch{
		Binary: os.Getenv("LOCAL_TEST_AGENT"), Args: []string{"-marker", os.Getenv("LOCAL_TEST_MARKER")},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(h)
	select {} // wait to be killed
}

// TestPidFileNamesOneProcess: an agent is known by its pid and start time
// (the agent is non-dumpable, so its environment is no way to tell it from
// another process of its user): a pid file naming a live process that
// started at another time is not the agent, nor is a reused pid.
func TestPidFileNamesOneProcess(t *testing.T) {
	p := newProvisioner(t)
	node := spec.Node{Name: "n-pid", Provisioner: spec.Provisioner{Kind: Kind}}
	stopAll(t, p, node)
	ctx := context.Background()
	h, err := p.Start(ctx, node, provision.AgentLaunch{Binary: fakeAgent, Args: []string{"-marker", filepath.Join(t.TempDir(), "m")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(ctx, node, h) })
	pidFile := filepath.Join(h.Dir, "agent.pid")
	orig, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, start, ok := strings.Cut(strings.TrimSpace(string(orig)), " ")
	if !ok || pid != strconv.Itoa(h.PID) || start == "" {
		t.Fatalf("pid file %q: want \"%d START\"", orig, h.PID)
	}
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	for _, tc := range []struct {
		file  string
		alive bool
	}{
		{fmt.Sprintf("%d %s\n", other.Process.Pid, start), false}, // another process, our start time
		{pid + " 1\n", false}, // our pid, started at another time: reused
		{string(orig), true},
	} {
		if err := os.WriteFile(pidFile, []byte(tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		if alive, err := p.Alive(ctx, node, h); err != nil || alive != tc.alive {
			t.Errorf("pid file %q: Alive = %v, %v; want %v", tc.file, alive, err, tc.alive)
		}
	}
}
