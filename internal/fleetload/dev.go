package fleetload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// endpoints is what `trainyard dev` writes to DATA/endpoints.json (the
// fields the load needs; older binaries lack the agent credentials).
type endpoints struct {
	API                string `json:"api"`
	Temporal           string `json:"temporal"`
	Namespace          string `json:"namespace"`
	AdminTokenFile     string `json:"admin_token_file"`
	S3AgentCredentials string `json:"s3_agent_credentials_file"`
}

// proc is a child process whose exit is waited for once, in the
// background, so that stop can be called from anywhere and more than once.
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    *os.File
	exited chan struct{}
	err    error // set before exited closes
}

// start runs cmd with its output appended to logPath. The child gets its
// own process group (stop signals it and what it forked) and dies with
// this process (see childAttrs), so a killed test leaves nothing running.
func start(name string, cmd *exec.Cmd, logPath string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttrs()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logf, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends sig to the process group, then SIGKILL after grace; false
// when it took the SIGKILL.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) bool {
	if !p.running() {
		return true
	}
	_ = syscall.Kill(-p.pid(), sig)
	select {
	case <-p.exited:
		return true
	case <-time.After(grace):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.exited
		return false
	}
}

// tail is the end of the process's log, for errors.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log.Name())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// dev is a running `trainyard dev`.
type dev struct {
	*proc
	dir   string
	ep    endpoints
	admin string
}

// startDev runs `bin dev` on dataDir with every port random and loopback,
// and waits until endpoints.json is written and /readyz answers 200 (as
// internal/e2e does).
func startDev(ctx context.Context, bin, dataDir, logDir string, wait time.Duration) (*dev, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("dev data dir: %w", err)
	}
	cmd := exec.Command(bin, "dev", "--data-dir", dataDir, "--ip", "127.0.0.1",
		"--api-port", "0", "--temporal-port", "0", "--ui-port", "0", "--s3-port", "0")
	cmd.Env = baseEnv()
	if addr := os.Getenv("TRAINYARD_PPROF"); addr != "" {
		cmd.Env = append(cmd.Env, "TRAINYARD_PPROF="+addr) // the control plane's profiles, not the agents'
	}
	p, err := start("trainyard dev", cmd, filepath.Join(logDir, "dev.log"))
	if err != nil {
		return nil, err
	}
	d := &dev{proc: p, dir: dataDir}
	if err := d.waitReady(ctx, wait); err != nil {
		d.stop(syscall.SIGKILL, 0)
		return nil, err
	}
	return d, nil
}

func (d *dev) waitReady(ctx context.Context, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		if !d.running() {
			return fmt.Errorf("trainyard dev exited early: %v; log:\n%s", d.err, d.tail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("trainyard dev not ready after %v; log:\n%s", wait, d.tail())
		}
		if d.ready(ctx) {
			tok, err := os.ReadFile(d.ep.AdminTokenFile)
			if err != nil {
				return fmt.Errorf("admin token: %w", err)
			}
			d.admin = strings.TrimSpace(string(tok))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ready reads endpoints.json (written once everything listens) and asks
// /readyz.
func (d *dev) ready(ctx context.Context) bool {
	b, err := os.ReadFile(filepath.Join(d.dir, "endpoints.json"))
	if err != nil || json.Unmarshal(b, &d.ep) != nil || d.ep.API == "" {
		return false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.ep.API+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// cli runs a client subcommand of bin against d (--data-dir finds the URL
// and admin token) and returns its stdout; stderr goes into the error.
func (d *dev) cli(ctx context.Context, bin string, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, bin, append(args, "--data-dir", d.dir)...)
	cmd.Env = baseEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), stderr.String(), fmt.Errorf("trainyard %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), stderr.String(), nil
}

// clusterUp writes the spec and brings the cluster up without waiting:
// static nodes stay Pending until their agents join.
func (d *dev) clusterUp(ctx context.Context, bin, specPath, spec string) error {
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		return fmt.Errorf("cluster spec: %w", err)
	}
	_, _, err := d.cli(ctx, bin, "cluster", "up", "-f", specPath, "--wait=false")
	return err
}

// agentEnv is the environment `cluster join-token NAME --env` prints for a
// static node's agent: Temporal, S3 and a fresh join token.
func (d *dev) agentEnv(ctx context.Context, bin, cluster string) ([]string, error) {
	args := []string{"cluster", "join-token", cluster, "--env", "--label", "fleetload"}
	if d.ep.S3AgentCredentials != "" {
		args = append(args, "--s3-credentials", d.ep.S3AgentCredentials)
	}
	out, _, err := d.cli(ctx, bin, args...)
	if err != nil {
		return nil, err
	}
	env, err := parseEnv(out)
	if err != nil {
		return nil, fmt.Errorf("cluster join-token %s --env: %w", cluster, err)
	}
	return env, nil
}

// parseEnv reads VAR=value lines as writeAgentEnv writes them: comments,
// and values in single quotes with ' written as '\”.
func parseEnv(s string) ([]string, error) {
	var env []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("not VAR=value: %q", line)
		}
		if strings.HasPrefix(v, "'") {
			if len(v) < 2 || !strings.HasSuffix(v, "'") {
				return nil, fmt.Errorf("unterminated quote: %q", line)
			}
			v = strings.ReplaceAll(v[1:len(v)-1], `'\''`, `'`)
		}
		env = append(env, k+"="+v)
	}
	if !hasVar(env, "TRAINYARD_JOIN_SECRET") {
		return nil, errors.New("no TRAINYARD_JOIN_SECRET in it")
	}
	return env, sc.Err()
}

func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// baseEnv is this process's environment without TRAINYARD_* variables: the
// agents' flags come from the environment (config.Apply), so a caller's own
// TRAINYARD_TOKEN or TRAINYARD_CLUSTER must not leak into them.
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TRAINYARD_") {
			out = append(out, kv)
		}
	}
	return out
}
