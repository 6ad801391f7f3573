// Package sshtest starts a real OpenSSH server on 127.0.0.1 for a test,
// with throwaway host and user keys, logging in as the current user.
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

// Start runs sshd until the test ends; it fails the test (or skips it, when
// TRAINYARD_REQUIRE_SSHD is unset and no sshd is installed).
func Start(t testing.TB) *Server {
	t.Helper()
	bin := findSSHD(t)
	s := &Server{Dir: t.TempDir()}
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
ListenAddress 127.0.0.1
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
`, s.Port, hostKeyFile, filepath.Join(s.Dir, "sshd.pid"), auth)
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		logFile, err := os.Create(filepath.Join(s.Dir, "sshd.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-D", "-e", "-f", cfg)
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
	line := knownhosts.Line([]string{knownhosts.Normalize("127.0.0.1:" + strconv.Itoa(s.Port))}, s.HostKey)
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
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.Port), time.Second)
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
		Address: "127.0.0.1",
		Provisioner: spec.Provisioner{Kind: spec.KindSSH, SSH: &spec.SSH{
			User: u.Username, Port: s.Port, KeyPath: s.UserKey, KnownHostsPath: s.KnownHosts,
			RemoteDir: filepath.Join(s.Dir, "remote", name),
		}},
	}
}
