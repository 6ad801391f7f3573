package ssh

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/provision"
	"github.com/trainyard/trainyard/internal/provision/provisiontest"
	"github.com/trainyard/trainyard/internal/provision/sshtest"
)

var fakeAgent string

func TestMain(m *testing.M) {
	provisiontest.RunWithFakeAgent(m, &fakeAgent)
}

const wait = 15 * time.Second

// Start over real SSH: copied binary, minimal environment, idempotent
// start, stop, restart.
func TestStartStopOverSSH(t *testing.T) {
	s := sshtest.Start(t)
	p := New()
	p.Grace = 5 * time.Second
	ctx := context.Background()
	nodes := []spec.Node{s.Node(t, "nickel"), s.Node(t, "zinc")}
	t.Cleanup(func() {
		for _, n := range nodes {
			if err := p.Stop(context.Background(), n, provision.Handle{}); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	for _, n := range nodes {
		marker := filepath.Join(s.Dir, n.Name+".marker")
		launch := provision.AgentLaunch{
			Binary: fakeAgent,
			Args:   []string{"-marker", marker, "--", "--node", n.Name},
			Env:    map[string]string{"TRAINYARD_JOIN_SECRET": "top $ecret"},
			Config: []byte("node: " + n.Name + "\n"),
		}
		h, err := p.Start(ctx, n, launch)
		if err != nil {
			t.Fatal(err)
		}
		remoteDir := settingsOf(t, n).RemoteDir
		if !h.Started || h.PID <= 0 || h.Dir != remoteDir {
			t.Fatalf("%s: handle %+v", n.Name, h)
		}
		recs, err := provisiontest.WaitMarker(marker, wait, func(r []provisiontest.Record) bool { return len(r) == 1 })
		if err != nil {
			t.Fatal(err)
		}
		r := recs[0]
		if r.PID != h.PID || strings.Join(r.Args, " ") != "--node "+n.Name {
			t.Fatalf("%s: record %+v, handle %+v", n.Name, r, h)
		}
		// The copy is the binary we sent.
		if got, err := fileSHA256(filepath.Join(remoteDir, AgentFile)); err != nil || got != mustSHA(t, fakeAgent) {
			t.Fatalf("%s: remote binary sum %s, %v", n.Name, got, err)
		}
		if r.Env["TRAINYARD_JOIN_SECRET"] != "top $ecret" || r.Env[provision.EnvAgentDir] != remoteDir {
			t.Fatalf("%s: env %v", n.Name, r.Env)
		}
		for k := range r.Env {
			if strings.HasPrefix(k, "SSH_") {
				t.Fatalf("%s: agent inherited %s from the ssh session", n.Name, k)
			}
		}
		if cfg, err := os.ReadFile(r.Env[provision.EnvAgentConfig]); err != nil || string(cfg) != "node: "+n.Name+"\n" {
			t.Fatalf("%s: config %q, %v", n.Name, cfg, err)
		}
		// Started twice: the running agent is found, not duplicated.
		h2, err := p.Start(ctx, n, launch)
		if err != nil {
			t.Fatal(err)
		}
		if h2.Started || h2.PID != h.PID {
			t.Fatalf("%s: second start %+v, first %+v", n.Name, h2, h)
		}
		if alive, err := p.Alive(ctx, n, h); err != nil || !alive {
			t.Fatalf("%s: Alive = %v, %v", n.Name, alive, err)
		}
	}
	// Stop the first; the second keeps running.
	if err := p.Stop(ctx, nodes[0], provision.Handle{}); err != nil {
		t.Fatal(err)
	}
	if _, err := provisiontest.WaitMarker(filepath.Join(s.Dir, "nickel.marker"), wait, func(r []provisiontest.Record) bool { return r[0].Stopped }); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true} {
		if alive, err := p.Alive(ctx, nodes[i], provision.Handle{}); err != nil || alive != want {
			t.Fatalf("%s: Alive = %v, %v; want %v", nodes[i].Name, alive, err, want)
		}
	}
	// Stop is idempotent, and a stopped node starts again.
	if err := p.Stop(ctx, nodes[0], provision.Handle{}); err != nil {
		t.Fatal(err)
	}
	h3, err := p.Start(ctx, nodes[0], provision.AgentLaunch{Binary: fakeAgent, Args: []string{"-marker", filepath.Join(s.Dir, "nickel.marker")}})
	if err != nil || !h3.Started {
		t.Fatalf("restart: %+v, %v", h3, err)
	}
}

func mustSHA(t *testing.T, path string) string {
	s, err := fileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Each way to fail names the node and the cause, and leaves no agent.
func TestStartFailures(t *testing.T) {
	s := sshtest.Start(t)
	ctx := context.Background()

	otherKey := filepath.Join(t.TempDir(), "other_key")
	sshtest.WriteKey(t, otherKey)
	emptyKnownHosts := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(emptyKnownHosts, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wrongKnownHosts := filepath.Join(t.TempDir(), "known_hosts")
	impostor := sshtest.WriteKey(t, filepath.Join(t.TempDir(), "impostor"))
	line := knownhosts.Line([]string{knownhosts.Normalize("127.0.0.1:" + strconv.Itoa(s.Port))}, impostor)
	if err := os.WriteFile(wrongKnownHosts, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notAKey := filepath.Join(t.TempDir(), "not_a_key")
	if err := os.WriteFile(notAKey, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(aFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		edit   func(s *Settings)
		launch provision.AgentLaunch
		err    []string
	}{
		{name: "bad key", edit: func(s *Settings) { s.KeyPath = otherKey },
			err: []string{`node "copper"`, "ssh key " + otherKey + " not accepted"}},
		{name: "missing key file", edit: func(s *Settings) { s.KeyPath = otherKey + ".missing" },
			err: []string{`node "copper": read ssh key`, "no such file"}},
		{name: "not a key", edit: func(s *Settings) { s.KeyPath = notAKey },
			err: []string{`node "copper": parse ssh key`}},
		{name: "unknown host key", edit: func(s *Settings) { s.KnownHostsPath = emptyKnownHosts },
			err: []string{`node "copper": host key of 127.0.0.1:`, "is not in " + emptyKnownHosts}},
		{name: "changed host key", edit: func(s *Settings) { s.KnownHostsPath = wrongKnownHosts },
			err: []string{`node "copper": HOST KEY MISMATCH`}},
		{name: "unreachable host", edit: func(s *Settings) { s.Port = sshtest.FreePort(t) },
			err: []string{`node "copper": connect to 127.0.0.1:`, "connection refused"}},
		{name: "wrong user", edit: func(s *Settings) { s.User = "nobody" },
			err: []string{`node "copper"`, "not accepted for nobody@"}},
		{name: "copy fails", edit: func(s *Settings) { s.RemoteDir = filepath.Join(aFile, "agent") },
			err: []string{`node "copper"`, "copy " + AgentFile}},
		{name: "agent exits at once", launch: provision.AgentLaunch{Binary: fakeAgent, Args: []string{"-exit-now"}},
			err: []string{`node "copper"`, "exited right after start", "refusing to start"}},
		{name: "missing binary", launch: provision.AgentLaunch{Binary: "/nonexistent/trainyard"},
			err: []string{`node "copper": agent binary`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := s.Node(t, "copper")
			set := settingsOf(t, n)
			set.RemoteDir = filepath.Join(t.TempDir(), "copper")
			if tt.edit != nil {
				tt.edit(&set)
			}
			Set(&n, set)
			launch := tt.launch
			if launch.Binary == "" {
				launch = provision.AgentLaunch{Binary: fakeAgent, Args: []string{"-marker", filepath.Join(t.TempDir(), "marker")}}
			}
			p := New()
			p.DialTimeout = 10 * time.Second
			_, err := p.Start(ctx, n, launch)
			if err == nil {
				t.Fatal("Start succeeded")
			}
			for _, w := range tt.err {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			// Nothing half-started: check with the good settings.
			good := s.Node(t, "copper")
			gs := settingsOf(t, good)
			gs.RemoteDir = set.RemoteDir
			Set(&good, gs)
			if alive, err := p.Alive(ctx, good, provision.Handle{}); err != nil || alive {
				t.Fatalf("after failed start: Alive = %v, %v", alive, err)
			}
		})
	}
}

// The host key algorithm list follows known_hosts, so a server whose
// preferred key type is not the known one still verifies.
func TestKnownAlgorithms(t *testing.T) {
	dir := t.TempDir()
	ed := sshtest.WriteKey(t, filepath.Join(dir, "ed"))
	kh := filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize("example.org:2222")}, ed)
	if err := os.WriteFile(kh, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	check, err := knownhosts.New(kh)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr string
		want []string
	}{
		{addr: "example.org:2222", want: []string{xssh.KeyAlgoED25519}},
		{addr: "example.org:22", want: nil},
	}
	for _, tt := range tests {
		if got := knownAlgorithms(check, tt.addr); strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("knownAlgorithms(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

func settingsOf(t testing.TB, n spec.Node) Settings {
	t.Helper()
	s, err := SettingsOf(n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
