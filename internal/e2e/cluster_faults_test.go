package e2e

import (
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/provision/provisiontest"
	sshprov "github.com/trainyard/trainyard/internal/provision/ssh"
	"github.com/trainyard/trainyard/internal/provision/sshtest"
)

// TestClusterOverSSH: up/status/down through the ssh provisioner against a
// real OpenSSH server on loopback.
func TestClusterOverSSH(t *testing.T) {
	t.Parallel()
	srv := sshtest.Start(t)
	dev := startDev(t, t.TempDir())
	var nodes []string
	for _, name := range []string{"ssh-a", "ssh-b"} {
		n := srv.Node(t, name)
		s := sshSettings(t, n)
		nodes = append(nodes, "  - name: "+name+"\n    address: 127.0.0.1\n    provider: lab\n    provisioner:\n      kind: ssh\n      ssh: {user: "+s.User+", port: "+strconv.Itoa(s.Port)+
			", key: "+s.KeyPath+", known_hosts: "+s.KnownHostsPath+", remote_dir: "+s.RemoteDir+"}\n")
	}
	specFile := writeFile(t, "ssh.yaml", "name: lab\nnodes:\n"+strings.Join(nodes, ""))
	out := cli(t, dev, "cluster", "up", "-f", specFile, "--heartbeat-timeout", "5s")
	if !strings.Contains(out, "2 Idle") {
		t.Fatalf("cluster up over ssh: %s", out)
	}
	var st clusterStatus
	dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st)
	var pids []int
	for _, n := range st.Nodes {
		if n.AgentPID == 0 {
			t.Fatalf("node %s has no agent pid: %+v", n.Name, n)
		}
		pids = append(pids, n.AgentPID)
	}
	if _, err := os.Stat(filepath.Join(srv.Dir, "remote", "ssh-a", sshprov.AgentFile)); err != nil {
		t.Fatalf("binary not copied to the remote dir: %v", err)
	}
	// Nodes that cannot be reached are refused with the node and the cause,
	// and leave nothing running; the healthy nodes stay up.
	bad := sshSettings(t, srv.Node(t, "ssh-badkey"))
	otherKey := filepath.Join(t.TempDir(), "not-authorized")
	sshtest.WriteKey(t, otherKey)
	badFile := writeFile(t, "bad.yaml", "name: lab\nnodes:\n"+strings.Join(nodes, "")+
		"  - name: ssh-badkey\n    address: 127.0.0.1\n    provisioner:\n      kind: ssh\n      ssh: {user: "+bad.User+", port: "+strconv.Itoa(srv.Port)+
		", key: "+otherKey+", known_hosts: "+srv.KnownHosts+", remote_dir: "+bad.RemoteDir+"}\n"+
		"  - name: ssh-unreachable\n    address: 127.0.0.1\n    provisioner:\n      kind: ssh\n      ssh: {user: "+bad.User+", port: "+freePortStr(t)+
		", key: "+srv.UserKey+", known_hosts: "+srv.KnownHosts+"}\n")
	cmd := exec.Command(binary, "cluster", "up", "-f", badFile, "--data-dir", dev.dir)
	msg, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "2 node(s) failed") {
		t.Fatalf("up with bad nodes: want a failure exit, got %v:\n%s", err, msg)
	}
	dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st)
	for _, n := range st.Nodes {
		switch n.Name {
		case "ssh-badkey", "ssh-unreachable":
			if n.Health != "Failed" || !strings.Contains(n.Error, n.Name) || n.AgentPID != 0 {
				t.Errorf("%s: health %s, error %q", n.Name, n.Health, n.Error)
			}
		default:
			if n.Health != "Idle" && n.Health != "Healthy" {
				t.Errorf("%s went %s when other nodes failed", n.Name, n.Health)
			}
		}
	}
	if _, err := os.Stat(bad.RemoteDir); err == nil {
		t.Errorf("ssh-badkey: remote dir %s exists though login failed", bad.RemoteDir)
	}
	t.Logf("bad nodes: %s", msg)

	cli(t, dev, "cluster", "down", "lab")
	waitFor(t, func() bool {
		for _, pid := range pids {
			if !provisiontest.ProcessGone(pid) {
				return false
			}
		}
		return true
	})
}

// TestClusterUpSurvivesControlPlaneKill: SIGKILL `trainyard dev` right
// after `up` was accepted, start it again: up completes and no agent runs
// twice.
func TestClusterUpSurvivesControlPlaneKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Fixed ports: agents started before the crash must find Temporal again.
	ports := []string{"--temporal-port", freePortStr(t), "--api-port", freePortStr(t), "--s3-port", freePortStr(t), "--ui-port", freePortStr(t)}
	dev := startDev(t, dir, ports...)
	code, _, raw := dev.callRaw("POST", "/v1/clusters?heartbeat_timeout=5s", dev.admin, "application/yaml", localSpec)
	if code != 202 {
		t.Fatalf("up: %d %s", code, raw)
	}
	dev.kill(syscall.SIGKILL)

	dev2 := startDev(t, dir, ports...)
	t.Cleanup(func() {
		cli(t, dev2, "cluster", "down", "lab")
		waitFor(t, func() bool {
			return countAgents(dir, "head")+countAgents(dir, "worker-1")+countAgents(dir, "worker-2") == 0
		})
	})
	var st clusterStatus
	waitFor(t, func() bool {
		st = clusterStatus{}
		if code, _, _ := dev2.call("GET", "/v1/clusters/lab", dev2.admin, nil, &st); code != 200 {
			return false
		}
		live := 0
		for _, n := range st.Nodes {
			if n.Health == "Idle" || n.Health == "Healthy" {
				live++
			}
		}
		return live == 3 && !st.Busy
	})
	for _, n := range []string{"head", "worker-1", "worker-2"} {
		if c := countAgents(dir, n); c != 1 {
			t.Errorf("node %s: %d agent processes, want exactly 1", n, c)
		}
	}
}

// countAgents counts live agent processes of node started for the dev
// instance with data dir dataDir (the local provisioner keeps agents under
// DATA/agents and says so in their environment).
func countAgents(dataDir, node string) int {
	want := "TRAINYARD_AGENT_DIR=" + filepath.Join(dataDir, "agents", node) + "\x00"
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || provisiontest.ProcessGone(pid) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 1 && args[1] == "agent" && strings.Contains(string(env)+"\x00", want) {
			n++
		}
	}
	return n
}

// freePortStr finds a free port below the kernel's ephemeral range
// (32768+), so the ports a process picks with ":0" — `dev` picks Temporal's
// internal ports that way — can never take it between check and use.
func freePortStr(t *testing.T) string {
	for range 100 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			l.Close()
			return strconv.Itoa(port)
		}
	}
	t.Fatal("no free port below 32000")
	return ""
}

// sshSettings are an sshtest node's settings, to write into a spec file.
func sshSettings(t *testing.T, n spec.Node) sshprov.Settings {
	t.Helper()
	s, err := sshprov.SettingsOf(n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
