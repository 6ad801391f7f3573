// Package chaos is the fault and abuse suite (`make chaos`): it drives the
// real `trainyard` binary — `trainyard s3` as a process of its own, `dev`
// using it, local agents — kills each piece with SIGKILL in the middle of
// work and counts what was lost; it fuzzes every API route from the
// OpenAPI document and puts 200 concurrent submissions on `dev`.
package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "trainyard-chaos-bin")
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
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one started trainyard process (dev, s3) with its log in a file.
type proc struct {
	name   string
	cmd    *exec.Cmd
	logf   *os.File
	exited chan struct{}
	killed bool
}

func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), name+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: exec.Command(binary, args...), logf: logf, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

// kill SIGKILLs the process and waits until it is gone.
func (p *proc) kill() {
	if p.killed {
		return
	}
	p.killed = true
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *proc) log() string {
	b, _ := os.ReadFile(p.logf.Name())
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return string(b)
}

// endpoints mirrors DATA/endpoints.json written by `trainyard dev`.
type endpoints struct {
	API            string `json:"api"`
	S3             string `json:"s3"`
	Bucket         string `json:"bucket"`
	S3Credentials  string `json:"s3_credentials_file"`
	AdminTokenFile string `json:"admin_token_file"`
}

// plane is a control plane under test: an S3 process, `dev` on top of it,
// both on fixed ports so agents find them again after a restart.
type plane struct {
	t        *testing.T // the (sub)test failing now
	root     *testing.T // owns the processes: they outlive subtests
	dir      string
	s3Port   string
	devPorts []string
	s3, dev  *proc
	ep       endpoints
	admin    string
	http     *http.Client
}

func newPlane(t *testing.T) *plane {
	p := &plane{t: t, root: t, dir: t.TempDir(), s3Port: freePort(t),
		devPorts: []string{"--api-port", freePort(t), "--temporal-port", freePort(t), "--ui-port", freePort(t)},
		http:     &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}},
	}
	t.Cleanup(func() { killAgentsOf(p.dir) })
	p.startS3()
	p.startDev()
	return p
}

func (p *plane) s3URL() string { return "http://127.0.0.1:" + p.s3Port }

// startS3 runs `trainyard s3` and waits until it answers.
func (p *plane) startS3() {
	p.t.Helper()
	p.s3 = startProc(p.root, "s3", "s3", "--data-dir", p.dir, "--port", p.s3Port)
	p.waitUntil("s3", 30*time.Second, p.s3, func() bool {
		resp, err := http.Get(p.s3URL() + "/_health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// startDev runs `trainyard dev --s3-endpoint` and waits for /readyz.
func (p *plane) startDev() {
	p.t.Helper()
	os.Remove(filepath.Join(p.dir, "endpoints.json"))
	args := slices.Concat([]string{"dev", "--data-dir", p.dir, "--s3-endpoint", p.s3URL()}, p.devPorts)
	p.dev = startProc(p.root, "dev", args...)
	p.waitUntil("dev", 120*time.Second, p.dev, func() bool {
		b, err := os.ReadFile(filepath.Join(p.dir, "endpoints.json"))
		if err != nil || json.Unmarshal(b, &p.ep) != nil {
			return false
		}
		resp, err := http.Get(p.ep.API + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	tok, err := os.ReadFile(p.ep.AdminTokenFile)
	if err != nil {
		p.t.Fatal(err)
	}
	p.admin = strings.TrimSpace(string(tok))
}

func (p *plane) waitUntil(what string, limit time.Duration, pr *proc, ok func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if !pr.alive() {
			p.t.Fatalf("%s exited early; log:\n%s", what, pr.log())
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s not ready after %v; log:\n%s", what, limit, pr.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// do sends one request; body is sent as is with contentType. A transport
// error is returned, not fatal: the server may be down on purpose.
func (p *plane) do(method, path, token, contentType string, body []byte) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, p.ep.API+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != nil && contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw, err
}

// getJSON GETs path as admin into out; any failure is returned.
func (p *plane) getJSON(path string, out any) error {
	code, _, raw, err := p.do("GET", path, p.admin, "", nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, code, raw)
	}
	return json.Unmarshal(raw, out)
}

// mustJSON sends a JSON body as admin and fails unless the status is want.
func (p *plane) mustJSON(method, path string, body any, want int, out any) {
	p.t.Helper()
	j, _ := json.Marshal(body)
	if s, ok := body.(string); ok {
		j = []byte(s)
	}
	code, _, raw, err := p.do(method, path, p.admin, "application/json", j)
	if err != nil || code != want {
		p.t.Fatalf("%s %s: %d %s %v", method, path, code, raw, err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			p.t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
}

// cli runs the trainyard CLI against this plane and returns its stdout.
func (p *plane) cli(args ...string) string {
	p.t.Helper()
	cmd := exec.Command(binary, append(args, "--data-dir", p.dir)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		p.t.Fatalf("trainyard %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// clusterUp starts a local cluster from spec and returns its name.
func (p *plane) clusterUp(spec string) {
	p.t.Helper()
	f := filepath.Join(p.t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(f, []byte(spec), 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.cli("cluster", "up", "-f", f, "--heartbeat-timeout", "5s")
}

// freePort finds a free port below the kernel's ephemeral range, so the
// ports processes pick with ":0" cannot take it between check and use.
func freePort(t *testing.T) string {
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

// killAgentsOf SIGKILLs the agents the local provisioner started for the
// data dir dir (they outlive dev by design).
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

// show prints a report for `make chaos`, each line marked "chaos|" so the
// target can pick them out of `go test -v`.
func show(report string) {
	for _, l := range strings.Split(strings.TrimRight(report, "\n"), "\n") {
		fmt.Println("chaos| " + l)
	}
}
