// Package ssh provisions node agents over SSH (the manage_ray_cluster.sh
// replacement of seed 001): key authentication, host keys checked against
// known_hosts, the agent binary and its config copied through the SSH
// session itself (no scp needed on either side), the agent started detached
// with a pid file, and every step idempotent.
package ssh

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/trainyard/trainyard/internal/agent/procenv"
	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/provision"
	"github.com/trainyard/trainyard/internal/provision/lifecycle"
)

// AgentFile is the agent binary's name in the remote directory.
const AgentFile = "trainyard-agent"

// Provisioner is the ssh provisioner.
type Provisioner struct {
	// DialTimeout bounds connecting and the SSH handshake.
	DialTimeout time.Duration
	// Grace is how long Stop waits after SIGTERM before SIGKILL.
	Grace time.Duration
	// StartCheck is how long a new agent must stay up for Start to
	// succeed (catches agents that die at once, e.g. a wrong-architecture
	// binary, while the error can still say why).
	StartCheck time.Duration
}

// New returns an ssh provisioner with defaults.
func New() *Provisioner {
	return &Provisioner{DialTimeout: 15 * time.Second, Grace: 10 * time.Second, StartCheck: 500 * time.Millisecond}
}

var _ provision.Provisioner = (*Provisioner)(nil)

// settings are a node's SSH settings with defaults applied.
type settings struct {
	user, addr, key, knownHosts, dir string
}

func resolve(node spec.Node) (settings, error) {
	if node.Provisioner.Kind != Kind {
		return settings{}, fmt.Errorf("node %q: provisioner is %q, not ssh", node.Name, node.Provisioner.Kind)
	}
	if node.Address == "" {
		return settings{}, fmt.Errorf("node %q: no address to connect to", node.Name)
	}
	s, err := SettingsOf(node)
	if err != nil {
		return settings{}, fmt.Errorf("node %q: provisioner.ssh: %w", node.Name, err)
	}
	out := settings{user: s.User, key: s.KeyPath, knownHosts: s.KnownHostsPath, dir: s.RemoteDir}
	if out.user == "" {
		u, err := user.Current()
		if err != nil {
			return settings{}, fmt.Errorf("node %q: no ssh user given and the current one is unknown: %w", node.Name, err)
		}
		out.user = u.Username
	}
	port := s.Port
	if port == 0 {
		port = 22
	}
	out.addr = net.JoinHostPort(node.Address, strconv.Itoa(port))
	if out.key, err = expandHome(out.key, "~/.ssh/id_ed25519"); err != nil {
		return settings{}, fmt.Errorf("node %q: %w", node.Name, err)
	}
	if out.knownHosts, err = expandHome(out.knownHosts, "~/.ssh/known_hosts"); err != nil {
		return settings{}, fmt.Errorf("node %q: %w", node.Name, err)
	}
	if out.dir == "" {
		// Per node, so several nodes on one host (tests, multi-GPU boxes
		// split into nodes) do not share a pid file.
		out.dir = ".trainyard/agents/" + node.Name
	}
	return out, nil
}

func expandHome(p, def string) (string, error) {
	if p == "" {
		p = def
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("expand %s: %w", p, err)
		}
		p = filepath.Join(home, strings.TrimPrefix(p, "~"))
	}
	return p, nil
}

// dial connects and authenticates, turning each failure into an error that
// names the node and says what to fix.
func (p *Provisioner) dial(ctx context.Context, node spec.Node, s settings) (*xssh.Client, error) {
	keyPEM, err := os.ReadFile(s.key)
	if err != nil {
		return nil, fmt.Errorf("node %q: read ssh key: %w", node.Name, err)
	}
	signer, err := xssh.ParsePrivateKey(keyPEM)
	if err != nil {
		var pm *xssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, fmt.Errorf("node %q: ssh key %s is protected by a passphrase; use an unencrypted deploy key", node.Name, s.key)
		}
		return nil, fmt.Errorf("node %q: parse ssh key %s: %w", node.Name, s.key, err)
	}
	check, err := knownhosts.New(s.knownHosts)
	if err != nil {
		return nil, fmt.Errorf("node %q: read known_hosts: %w", node.Name, err)
	}
	var keyErr *knownhosts.KeyError
	cfg := &xssh.ClientConfig{
		User: s.user,
		Auth: []xssh.AuthMethod{xssh.PublicKeys(signer)},
		HostKeyCallback: func(host string, remote net.Addr, key xssh.PublicKey) error {
			err := check(host, remote, key)
			errors.As(err, &keyErr)
			return err
		},
		// Ask for the key types known_hosts holds, or a server offering
		// another type first fails the check although its key is known.
		HostKeyAlgorithms: knownAlgorithms(check, s.addr),
		Timeout:           p.DialTimeout,
	}
	d := net.Dialer{Timeout: p.DialTimeout}
	conn, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return nil, fmt.Errorf("node %q: connect to %s: %w", node.Name, s.addr, err)
	}
	if p.DialTimeout > 0 {
		_ = conn.SetDeadline(time.Now().Add(p.DialTimeout))
	}
	c, chans, reqs, err := xssh.NewClientConn(conn, s.addr, cfg)
	if err != nil {
		conn.Close()
		switch {
		case keyErr != nil && len(keyErr.Want) == 0:
			return nil, fmt.Errorf("node %q: host key of %s is not in %s; verify the host and add its key (ssh-keyscan -p PORT HOST)", node.Name, s.addr, s.knownHosts)
		case keyErr != nil:
			return nil, fmt.Errorf("node %q: HOST KEY MISMATCH for %s: the key differs from %s:%d (reinstalled host, or someone intercepting the connection)", node.Name, s.addr, keyErr.Want[0].Filename, keyErr.Want[0].Line)
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, fmt.Errorf("node %q: ssh key %s not accepted for %s@%s: %w", node.Name, s.key, s.user, s.addr, err)
		}
		return nil, fmt.Errorf("node %q: ssh handshake with %s: %w", node.Name, s.addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return xssh.NewClient(c, chans, reqs), nil
}

// knownAlgorithms asks the known_hosts callback, with a key it cannot know,
// which keys it holds for addr.
func knownAlgorithms(check xssh.HostKeyCallback, addr string) []string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil
	}
	probe, err := xssh.NewPublicKey(pub)
	if err != nil {
		return nil
	}
	var ke *knownhosts.KeyError
	if !errors.As(check(addr, &net.TCPAddr{IP: net.IPv4zero}, probe), &ke) {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	add := func(a ...string) {
		for _, x := range a {
			if !seen[x] {
				seen[x] = true
				algos = append(algos, x)
			}
		}
	}
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case xssh.KeyAlgoRSA:
			add(xssh.KeyAlgoRSASHA512, xssh.KeyAlgoRSASHA256, xssh.KeyAlgoRSA)
		default:
			add(t)
		}
	}
	return algos
}

// runner runs lifecycle scripts in SSH sessions, under sh whatever the
// user's login shell.
type runner struct{ c *xssh.Client }

func (r runner) Run(ctx context.Context, script string, stdin io.Reader) (string, error) {
	sess, err := r.c.NewSession()
	if err != nil {
		return "", fmt.Errorf("open ssh session: %w", err)
	}
	defer sess.Close()
	var stdout, stderr bytes.Buffer
	sess.Stdin, sess.Stdout, sess.Stderr = stdin, &stdout, &stderr
	done := make(chan error, 1)
	go func() { done <- sess.Run("sh -c " + lifecycle.Quote(script)) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		sess.Close()
		return "", ctx.Err()
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Start copies the agent (only when the remote copy differs) and starts it,
// unless it already runs.
func (p *Provisioner) Start(ctx context.Context, node spec.Node, l provision.AgentLaunch) (provision.Handle, error) {
	s, err := resolve(node)
	if err != nil {
		return provision.Handle{}, err
	}
	sum, err := fileSHA256(l.Binary)
	if err != nil {
		return provision.Handle{}, fmt.Errorf("node %q: agent binary: %w", node.Name, err)
	}
	c, err := p.dial(ctx, node, s)
	if err != nil {
		return provision.Handle{}, err
	}
	defer c.Close()
	r := runner{c}
	h := provision.Handle{Node: node.Name, Kind: Kind}

	st, err := lifecycle.Status(ctx, r, s.dir, AgentFile)
	if err != nil {
		return h, fmt.Errorf("node %q: %w", node.Name, err)
	}
	if st.Alive {
		h.PID, h.Dir = st.PID, st.Dir
		return h, nil
	}
	if st.Sum != sum {
		f, err := os.Open(l.Binary)
		if err != nil {
			return h, fmt.Errorf("node %q: agent binary: %w", node.Name, err)
		}
		err = lifecycle.Put(ctx, r, s.dir, AgentFile, 0o700, f)
		f.Close()
		if err != nil {
			return h, fmt.Errorf("node %q: %w", node.Name, err)
		}
	}
	res, err := lifecycle.Launch(ctx, r, lifecycle.Agent{
		Dir: s.dir, Binary: AgentFile, Args: l.Args, Inherit: procenv.DefaultAllow, Env: l.Env, Config: l.Config,
	})
	if err != nil {
		return h, fmt.Errorf("node %q: %w", node.Name, err)
	}
	h.PID, h.Dir, h.Started = res.PID, res.Dir, res.Started
	if res.Started {
		if err := lifecycle.CheckStaysUp(ctx, r, s.dir, p.StartCheck); err != nil {
			return provision.Handle{}, fmt.Errorf("node %q: %w", node.Name, err)
		}
	}
	return h, nil
}

// Stop stops the agent (SIGTERM, SIGKILL after Grace); the binary stays
// for the next start.
func (p *Provisioner) Stop(ctx context.Context, node spec.Node, _ provision.Handle) error {
	s, err := resolve(node)
	if err != nil {
		return err
	}
	c, err := p.dial(ctx, node, s)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := lifecycle.Stop(ctx, runner{c}, s.dir, p.Grace); err != nil {
		return fmt.Errorf("node %q: %w", node.Name, err)
	}
	return nil
}

// Alive reports whether the agent process runs on the node. An unreachable
// node is an error, not "dead": the caller decides what silence means.
func (p *Provisioner) Alive(ctx context.Context, node spec.Node, _ provision.Handle) (bool, error) {
	s, err := resolve(node)
	if err != nil {
		return false, err
	}
	c, err := p.dial(ctx, node, s)
	if err != nil {
		return false, err
	}
	defer c.Close()
	st, err := lifecycle.Status(ctx, runner{c}, s.dir, "")
	if err != nil {
		return false, fmt.Errorf("node %q: %w", node.Name, err)
	}
	return st.Alive, nil
}
