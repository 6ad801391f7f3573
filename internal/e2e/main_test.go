// Package e2e drives the real `trainyard` binary: it builds it once, starts
// `trainyard dev` on random loopback ports in temp dirs and talks to it over
// HTTP and S3 like a user would.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "trainyard-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "trainyard")
	build := exec.Command("go", "build", "-o", binary, "../../cmd/trainyard")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build trainyard:", err)
		os.Exit(1)
	}
	code := m.Run()
	stopShared()
	os.RemoveAll(dir)
	os.Exit(code)
}

// endpoints mirrors what `trainyard dev` writes to DATA/endpoints.json.
type endpoints struct {
	API            string `json:"api"`
	TemporalUI     string `json:"temporal_ui"`
	Temporal       string `json:"temporal"`
	S3             string `json:"s3"`
	Bucket         string `json:"bucket"`
	S3Credentials  string `json:"s3_credentials_file"`
	AdminTokenFile string `json:"admin_token_file"`
}

type devProc struct {
	t       testing.TB
	cmd     *exec.Cmd
	dir     string
	ep      endpoints
	admin   string
	stdout  *bytes.Buffer
	stderr  *os.File
	exited  chan struct{} // closed once the process has been waited for
	stopped bool
}

// startDev runs `trainyard dev` on dir with every port random (unless
// extra flags fix them) and waits until /readyz says ready. The test's
// cleanup kills it and the agents it started.
func startDev(t testing.TB, dir string, extra ...string) *devProc {
	t.Helper()
	return startDevEnv(t, dir, nil, extra...)
}

// startDevEnv is startDev with env added to the test's environment (its
// agents inherit PATH: a fake nvidia-smi on it is what they detect).
func startDevEnv(t testing.TB, dir string, env []string, extra ...string) *devProc {
	t.Helper()
	p, err := launchDev(dir, t.TempDir(), env, extra...)
	if p != nil {
		t.Cleanup(func() {
			p.kill(syscall.SIGKILL)
			killAgentsOf(dir) // a failed test must not leave agents behind
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	p.t = t
	return p
}

// shared is the one `trainyard dev` that tests which only need an API
// (no cluster of their own, no kill) share; TestMain stops it.
var shared struct {
	once sync.Once
	dev  *devProc
	err  error
	dir  string
}

// sharedDev gives t the package's shared `trainyard dev`, started on first
// use. Tests on it must not kill it, change its policies, or depend on
// what other tests create there: they use cluster, node and token names of
// their own (local agents live in DATA/agents/<node>, so two clusters'
// nodes must not share a name).
func sharedDev(t *testing.T) *devProc {
	t.Helper()
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "trainyard-e2e-shared"); shared.err == nil {
			shared.dev, shared.err = launchDev(filepath.Join(shared.dir, "data"), shared.dir, nil)
		}
	})
	if shared.err != nil {
		t.Fatalf("shared dev: %v", shared.err)
	}
	p := *shared.dev
	p.t = t
	return &p
}

func stopShared() {
	if shared.dev != nil {
		shared.dev.kill(syscall.SIGKILL)
		killAgentsOf(shared.dev.dir)
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}

// launchDev starts dev with its log in logDir; on an error after the start
// it returns the process too, for the caller to kill.
func launchDev(dir, logDir string, env []string, extra ...string) (*devProc, error) {
	os.Remove(filepath.Join(dir, "endpoints.json"))
	logf, err := os.OpenFile(filepath.Join(logDir, "dev.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &devProc{dir: dir, stdout: &bytes.Buffer{}, stderr: logf}
	args := append([]string{"dev", "--data-dir", dir, "--api-port", "0", "--temporal-port", "0", "--ui-port", "0", "--s3-port", "0"}, extra...)
	p.cmd = exec.Command(binary, args...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, logf
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	p.exited = make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if time.Now().After(deadline) {
			return p, fmt.Errorf("trainyard dev not ready after 90s; log:\n%s", p.log())
		}
		select {
		case <-p.exited:
			return p, fmt.Errorf("trainyard dev exited early; log:\n%s", p.log())
		default:
		}
		if b, err := os.ReadFile(filepath.Join(dir, "endpoints.json")); err == nil {
			if err := json.Unmarshal(b, &p.ep); err != nil {
				return p, err
			}
			if resp, err := http.Get(p.ep.API + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	tok, err := os.ReadFile(p.ep.AdminTokenFile)
	if err != nil {
		return p, err
	}
	p.admin = strings.TrimSpace(string(tok))
	return p, nil
}

func (p *devProc) log() string {
	b, _ := os.ReadFile(p.stderr.Name())
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return p.stdout.String() + string(b)
}

// kill sends sig and waits for the process to exit.
func (p *devProc) kill(sig syscall.Signal) time.Duration {
	if p.stopped {
		return 0
	}
	p.stopped = true
	start := time.Now()
	_ = p.cmd.Process.Signal(sig)
	<-p.exited
	p.stderr.Close()
	return time.Since(start)
}

// callRaw sends body with contentType and returns the raw answer.
func (p *devProc) callRaw(method, path, token, contentType, body string) (int, http.Header, []byte) {
	p.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, p.ep.API+path, rd)
	if err != nil {
		p.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw
}

// call sends body (nil, a JSON string, or a value to encode) and decodes a
// successful JSON response into out (if non-nil).
func (p *devProc) call(method, path, token string, body any, out any) (int, http.Header, []byte) {
	p.t.Helper()
	var s string
	switch b := body.(type) {
	case nil:
	case string:
		s = b
	default:
		j, _ := json.Marshal(b)
		s = string(j)
	}
	code, hdr, raw := p.callRaw(method, path, token, "application/json", s)
	if out != nil && code < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			p.t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return code, hdr, raw
}

// waitFor polls cond for up to 30 s (visibility in Temporal is eventually
// consistent, so listings lag writes slightly).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// killAgentsOf SIGKILLs agents the local provisioner started for the dev
// instance with data dir dir.
func killAgentsOf(dir string) {
	prefix := "TRAINYARD_AGENT_DIR=" + filepath.Join(dir, "agents") + "/"
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(env), prefix) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
