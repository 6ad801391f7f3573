// Package sshtest starts a real OpenSSH server for a test (on 127.0.0.1,
// or inside a test host), with throwaway host and user keys, logging in as
// the current user.
package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/trainyard/trainyard/internal/cluster/spec"
)

// sshd is a real OpenSSH server on 127.0.0.1 for one test, with throwaway
// host and user keys, logging in as the current user.
type Server struct {
	Dir        string
	Addr       string // where it listens
	Port       int
	HostKey    xssh.PublicKey
	UserKey    string // private key file
	KnownHosts string // known_hosts naming the server
}

func findSSHD(t testing.TB) string {
	for _, p := range []string{"/usr/sbin/sshd", "/usr/local/sbin/sshd"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("sshd"); err == nil {
		return p
	}
	// `make test` installs openssh-server (mk/cluster.mk) and sets this, so
	// CI fails rather than silently skipping.
	if os.Getenv("TRAINYARD_REQUIRE_SSHD") != "" {
		t.Fatal("sshd not found; install openssh-server (make cluster-sshd)")
	}
	t.Skip("sshd not found; install openssh-server or run through make test")
	return ""
}

// WriteKey writes a new ed25519 private key in OpenSSH format and returns
// its public half.
func WriteKey(t testing.TB, path string) xssh.PublicKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := xssh.MarshalPrivateKey(priv, "trainyard test")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := xssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Options say where the server runs.
type Options struct {
	// Listen is its address (default 127.0.0.1).
	Listen string
	// Command makes its process (default exec.Command); a test host's
	// Command runs it inside the host's network namespace.
	Command func(name string, args ...string) *exec.Cmd
	// SetEnv are KEY=VALUE pairs sshd sets in every session (SetEnv),
	// after its own (HOME=... gives the login another home).
	SetEnv []string
}

// Start runs sshd on 127.0.0.1 until the test ends; it fails the test (or
// skips it, when TRAINYARD_REQUIRE_SSHD is unset and no sshd is installed).
func Start(t testing.TB) *Server { return StartWith(t, Options{}) }

// StartWith is Start where o says.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	bin := findSSHD(t)
	if o.Listen == "" {
		o.Listen = "127.0.0.1"
	}
	if o.Command == nil {
		o.Command = exec.Command
	}
	s := &Server{Dir: t.TempDir(), Addr: o.Listen}
	// Privilege separation directory Debian's sshd insists on (systemd
	// creates it on a real host).
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatalf("create /run/sshd: %v", err)
	}
	hostKeyFile := filepath.Join(s.Dir, "host_ed25519")
	s.HostKey = WriteKey(t, hostKeyFile)
	s.UserKey = filepath.Join(s.Dir, "user_ed25519")
	userPub := WriteKey(t, s.UserKey)
	auth := filepath.Join(s.Dir, "authorized_keys")
	if err := os.WriteFile(auth, xssh.MarshalAuthorizedKey(userPub), 0o600); err != nil {
		t.Fatal(err)
	}
	for attempt := 0; ; attempt++ {
		s.Port = FreePort(t)
		cfg := filepath.Join(s.Dir, "sshd_config")
		conf := fmt.Sprintf(`Port %d
ListenAddress %s
HostKey %s
PidFile %s
AuthorizedKeysFile %s
StrictModes no
UsePAM no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowTcpForwarding no
X11Forwarding no
LogLevel VERBOSE
`, s.Port, s.Addr, hostKeyFile, filepath.Join(s.Dir, "sshd.pid"), auth)
		if len(o.SetEnv) > 0 {
			conf += "SetEnv " + strings.Join(o.SetEnv, " ") + "\n"
		}
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		logFile, err := os.Create(filepath.Join(s.Dir, "sshd.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := o.Command(bin, "-D", "-e", "-f", cfg)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			t.Fatalf("start sshd: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
			logFile.Close()
		})
		if s.waitListening(exited) {
			break
		}
		log, _ := os.ReadFile(logFile.Name())
		if attempt == 2 {
			t.Fatalf("sshd did not start:\n%s", log)
		}
	}
	s.KnownHosts = filepath.Join(s.Dir, "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(net.JoinHostPort(s.Addr, strconv.Itoa(s.Port)))}, s.HostKey)
	if err := os.WriteFile(s.KnownHosts, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitListening polls until sshd accepts connections (false if it exited,
// e.g. because another process took the port).
func (s *Server) waitListening(exited <-chan struct{}) bool {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(s.Addr, strconv.Itoa(s.Port)), time.Second)
		if err == nil {
			c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// Node is a spec node reaching this server as the current user.
func (s *Server) Node(t testing.TB, name string) spec.Node {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return spec.Node{
		Name:    name,
		Address: s.Addr,
		// The section as a spec file gives it (sshtest cannot import the
		// ssh package, whose tests use it).
		Provisioner: spec.Provisioner{Kind: "ssh", Settings: spec.EncodeSettings(map[string]any{
			"user": u.Username, "port": s.Port, "key": s.UserKey, "known_hosts": s.KnownHosts,
			"remote_dir": filepath.Join(s.Dir, "remote", name),
		})},
	}
}
