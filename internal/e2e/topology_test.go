package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/inference/inferencetest"
	"github.com/trainyard/trainyard/internal/provision/sshtest"
	"github.com/trainyard/trainyard/internal/pythontest"
	"github.com/trainyard/trainyard/internal/testhosts"
)

// service is a control-plane process of the production topology.
type service struct {
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startService runs the binary with args and env added to the test's; it
// is killed when t ends, its output logged if t failed.
func startService(t *testing.T, name string, env []string, args ...string) *service {
	t.Helper()
	s := &service{name: name, cmd: exec.Command(binary, args...), out: &lockedBuffer{}, done: make(chan struct{})}
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, tail(s.out.String(), 3000))
		}
	})
	return s
}

func (s *service) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// await waits for re in the service's output and returns its first group.
func (s *service) await(t *testing.T, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(90 * time.Second)
	for {
		if m := rx.FindStringSubmatch(s.out.String()); m != nil {
			return m[len(m)-1]
		}
		select {
		case <-s.done:
			t.Fatalf("%s exited before %q:\n%s", s.name, re, tail(s.out.String(), 3000))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q after 90 s:\n%s", s.name, re, tail(s.out.String(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestProductionTopology (issue 31): the deployment docs' topology with
// nothing embedded. Temporal and S3 each in a process of their own
// (`trainyard temporal`, `trainyard s3`), two `trainyard server` replicas
// and two `trainyard worker`s against them, and three static agents started
// as the systemd unit starts them, each on a test host of its own, and two
// nodes a worker provisions over SSH into hosts of their own. A
// CartPole run trains to 475 across them; kill -9 of one server replica
// and one worker mid-run: the API answers through the other replica at
// once, and the run finishes with every iteration recorded once. Beside it, a 2-rank
// torch.distributed (gloo) gang on the two other hosts: rank 1 reaches
// rank 0 at the address its host's agent advertises, over the hosts' own
// links. Then an LLM loop, its trainer and rollout workers on different
// hosts.
func TestProductionTopology(t *testing.T) {
	t.Parallel()
	pythontest.Require(t, "TRAINYARD_REQUIRE_TORCH", "python-torch", "torch.distributed")
	n := testhosts.New(t)
	gw := n.Gateway.String()
	dir := t.TempDir()

	temporal := startService(t, "temporal", nil, "temporal", "--data-dir", filepath.Join(dir, "temporal"), "--ip", gw, "--port", "0")
	temporalAddr := temporal.await(t, `Temporal (\S+) \(namespace`)
	s3 := startService(t, "s3", nil, "s3", "--data-dir", filepath.Join(dir, "s3"), "--ip", gw, "--port", "0")
	s3URL := s3.await(t, `S3 (\S+) \(credentials`)
	var keys struct {
		ID     string `json:"access_key_id"`
		Secret string `json:"secret_access_key"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "s3", "s3-credentials.json")); err != nil || json.Unmarshal(b, &keys) != nil {
		t.Fatalf("S3 credentials: %v", err)
	}
	awsEnv := []string{"AWS_ACCESS_KEY_ID=" + keys.ID, "AWS_SECRET_ACCESS_KEY=" + keys.Secret}
	common := []string{"--temporal-address", temporalAddr, "--s3-endpoint", s3URL, "--s3-bucket", "trainyard"}

	// Replica A creates the first admin token; B shares the token store.
	servers := make([]*service, 2)
	urls := make([]string, 2)
	for i := range servers {
		servers[i] = startService(t, fmt.Sprintf("server %c", 'A'+i), awsEnv, append([]string{"server", "--listen", gw + ":0",
			"--tokens-file", filepath.Join(dir, "tokens.json"), "--admin-token-file", filepath.Join(dir, "admin.token"),
			"--plugin-cache-dir", filepath.Join(dir, fmt.Sprintf("wasm-server-%d", i))}, common...)...)
		urls[i] = servers[i].await(t, `Trainyard API on (\S+) `)
	}
	workers := make([]*service, 2)
	for i := range workers {
		workers[i] = startService(t, fmt.Sprintf("worker %c", 'A'+i), awsEnv, append([]string{"worker",
			"--agents-dir", filepath.Join(dir, fmt.Sprintf("agents-%d", i)), "--plugin-cache-dir", filepath.Join(dir, fmt.Sprintf("wasm-worker-%d", i))}, common...)...)
		workers[i].await(t, `control worker polling`)
	}

	// The CLI talks to replica A, as a user whose endpoints file names it.
	cliDir := filepath.Join(dir, "cli")
	useReplica := func(i int) *devProc {
		ep := endpoints{API: urls[i], Temporal: temporalAddr, S3: s3URL, Bucket: "trainyard",
			S3Credentials: filepath.Join(dir, "s3", "s3-credentials.json"), AdminTokenFile: filepath.Join(dir, "admin.token")}
		b, _ := json.Marshal(ep)
		if err := os.MkdirAll(cliDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cliDir, "endpoints.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		tok, err := os.ReadFile(ep.AdminTokenFile)
		if err != nil {
			t.Fatal(err)
		}
		return &devProc{t: t, dir: cliDir, ep: ep, admin: strings.TrimSpace(string(tok))}
	}
	ctl := useReplica(0)

	// An OpenAI-compatible server beside the control plane, for the LLM
	// loop: its trainer's host reaches it to announce weights, its rollout
	// workers' hosts to play.
	srv, err := inferencetest.Listen(gw+":0", "arith-1b")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	names := []string{"tin", "lead", "iron"}
	spec := fmt.Sprintf("name: lab\ndefaults: {provider: lab, provisioner: {kind: static}, resources: {cpus: 1}}\nnodes: [{name: tin}, {name: lead}, {name: iron}]\n"+
		"endpoints:\n  - {name: llm, url: %q, model: arith-1b, max_concurrency: 200, type: webhook, reload_url: %q}\n", srv.URL, srv.URL+"/admin/reload")
	// The default heartbeat timeout: nothing here is partitioned, and on a
	// starved machine a 6 s one declares healthy nodes Dead.
	cli(t, ctl, "cluster", "up", "-f", writeFile(t, "lab.yaml", spec), "--wait=false")
	token := strings.TrimSpace(cli(t, ctl, "cluster", "join-token", "lab"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hosts := map[string]*testhosts.Host{}
	for _, name := range names {
		hosts[name] = n.Host(name)
		startSystemdAgent(ctx, t, hosts[name], map[string]string{
			"TRAINYARD_CLUSTER":            "lab",
			"TRAINYARD_NODE":               name,
			"TRAINYARD_TEMPORAL_ADDRESS":   temporalAddr,
			"TRAINYARD_JOIN_SECRET":        token,
			"TRAINYARD_GPUS":               "none",
			"TRAINYARD_HEARTBEAT_INTERVAL": "2s",
			"TRAINYARD_S3_ENDPOINT":        s3URL,
			"TRAINYARD_S3_BUCKET":          "trainyard",
			"AWS_ACCESS_KEY_ID":            keys.ID,
			"AWS_SECRET_ACCESS_KEY":        keys.Secret,
		})
	}
	waitFor(t, func() bool {
		var st clusterStatus
		ctl.call("GET", "/v1/clusters/lab", ctl.admin, nil, &st)
		idle := 0
		for _, nd := range st.Nodes {
			if nd.Health == "Idle" {
				idle++
			}
		}
		return idle == len(names)
	})

	// Two nodes the workers provision over SSH, each sshd inside a host of
	// its own, in a cluster of their own. A worker hands the agents it
	// starts no S3 keys of its own: as on a real lab box, the login's
	// ~/.aws/credentials holds the host's.
	home := t.TempDir()
	creds := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", keys.ID, keys.Secret)
	if err := os.MkdirAll(filepath.Join(home, ".aws"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".aws", "credentials"), []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	var sshNodes []string
	for _, name := range []string{"ssh-1", "ssh-2"} {
		h := n.Host(name)
		hosts[name] = h
		srv := sshtest.StartWith(t, sshtest.Options{Listen: h.Addr.String(), SetEnv: []string{"HOME=" + home},
			Command: func(bin string, args ...string) *exec.Cmd { return h.Command(ctx, bin, args...) }})
		nd := sshSettings(t, srv.Node(t, name))
		sshNodes = append(sshNodes, fmt.Sprintf("  - name: %s\n    address: %s\n    provisioner:\n      kind: ssh\n      ssh: {user: %s, port: %d, key: %s, known_hosts: %s, remote_dir: %s}\n",
			name, h.Addr, nd.User, nd.Port, nd.KeyPath, nd.KnownHostsPath, nd.RemoteDir))
	}
	if out := cli(t, ctl, "cluster", "up", "-f", writeFile(t, "remote.yaml", "name: remote\nnodes:\n"+strings.Join(sshNodes, ""))); !strings.Contains(out, "2 Idle") {
		t.Fatalf("cluster up over SSH into two hosts: %s", out)
	}
	var remote clusterStatus
	ctl.call("GET", "/v1/clusters/remote", ctl.admin, nil, &remote)
	for _, nd := range remote.Nodes {
		if want := hosts[nd.Name].Addr.String(); nd.Address != want {
			t.Errorf("SSH node %s advertises %q, want its host's %s", nd.Name, nd.Address, want)
		}
	}

	id := strings.TrimSpace(cli(t, ctl, "run", "train", "--cluster", "lab", "--detach", "--env", "CartPole-v1",
		"--target-return", "475", "--checkpoint-every", "20", "--seed", "3"))
	gang := strings.TrimSpace(cli(t, ctl, "run", "train", "--cluster", "lab", "--nodes", "2", "--sync-every", "1", "--detach", "--", pythontest.Python, "-c", allReduce))
	// A self-play generation on the SSH nodes (the binary's own
	// kinrow-square8_2p plugin): play, gate, export, train, gauntlet.
	cli(t, ctl, "selfplay", "start", "--cluster", "remote", "--config", "square8_2p", "--generations", "1", "--games", "24", "--min-games", "24",
		"--simulations", "8", "--eval-games", "4", "--seed", "5")
	r := waitRun(t, ctl, id, 3*time.Minute, func(r runView) bool { return trained(r) >= 4 && r.Progress.State == "running" })
	servers[0].kill()
	workers[0].kill()
	killed := time.Now()
	t.Logf("kill -9 of server A and worker A after iteration %d (run on %s)", trained(r), r.Progress.Node)
	ctl = useReplica(1)
	if code, _, raw := ctl.call("GET", "/v1/runs/"+id, ctl.admin, nil, nil); code != http.StatusOK {
		t.Fatalf("replica B right after A's kill: %d %s", code, raw)
	}
	answered := time.Since(killed)
	r = waitRun(t, ctl, id, 6*time.Minute, func(r runView) bool { return r.Status != "running" })
	assertReached(t, r, 475) // every iteration once, none lost
	if out := cli(t, ctl, "run", "show", id); !strings.Contains(out, "succeeded") {
		t.Fatalf("run show through replica B:\n%s", out)
	}
	t.Logf("topology: replica B answered %v after A's kill; the run reached %.1f at iteration %d, %v after the kills (%d lost segments)",
		answered.Round(time.Millisecond), r.Progress.MeanReturn, r.Progress.Iteration, time.Since(killed).Round(time.Second), r.Progress.Failures)

	g := waitRun(t, ctl, gang, 4*time.Minute, func(r runView) bool { return r.Status != "running" })
	if g.Progress.State != "succeeded" {
		t.Fatalf("gang %s: %s/%s: %s %s", gang, g.Status, g.Progress.State, g.Error, g.Progress.Reason)
	}
	addrs := map[string]string{}
	for _, name := range names {
		addrs[hosts[name].Addr.String()] = name
	}
	master := ""
	for rank := range 2 {
		logs := cli(t, ctl, "run", "logs", gang, "--rank", fmt.Sprint(rank))
		m := regexp.MustCompile(fmt.Sprintf(`env %d 2 0 %d (\S+) True`, rank, rank)).FindStringSubmatch(logs)
		if m == nil || addrs[m[1]] == "" || !strings.Contains(logs, fmt.Sprintf("rank %d of 2 done: sum 3", rank)) {
			t.Fatalf("rank %d's log: want MASTER_ADDR a test host's address (%v) and the all-reduce's sum:\n%s", rank, addrs, logs)
		}
		if master != "" && m[1] != master {
			t.Fatalf("ranks were given MASTER_ADDR %s and %s", master, m[1])
		}
		master = m[1]
	}
	t.Logf("gang %s: both ranks reduced to 3 through MASTER_ADDR %s (host %s)", gang, master, addrs[master])

	sp := waitLoop(t, ctl, "remote/square8_2p", 4*time.Minute, func(sp api.Selfplay) bool { return sp.Status != "running" })
	if sp.Status != "completed" || len(sp.State.Generations) != 1 {
		t.Fatalf("self-play on the SSH nodes: %s (%s: %s), error %s", sp.Status, sp.State.Phase, sp.State.Reason, sp.Error)
	}
	g1 := sp.State.Generations[0]
	if g1.Games != 24 || g1.Dataset == "" || g1.Model == "" || len(g1.Gauntlet) < 2 || !strings.HasPrefix(g1.Node, "ssh-") {
		t.Fatalf("self-play generation on the SSH nodes: %+v", g1)
	}
	t.Logf("self-play generation on %s: %d games, %d positions, candidate %s, gauntlet %+v", g1.Node, g1.Games, g1.Positions, g1.Model, g1.Gauntlet)

	// An LLM loop (kind llm) across the hosts: its trainer on one, its two
	// rollout workers spread to the others. The workers hand trajectories
	// to the pool and ask for weight versions at the trainer's advertised
	// address, so the loop reaches its last step only if they can.
	trainer, err := filepath.Abs("../../plugins/arithmetic/trainer/train.py")
	if err != nil {
		t.Fatal(err)
	}
	loop := strings.TrimSpace(cli(t, ctl, "run", "llm", "--detach", "-f", writeFile(t, "loop.yaml", fmt.Sprintf(`
name: arith-loop
cluster: lab
env: arithmetic
capabilities: {http: [llm]}
rollout_workers: 2
cpus: 0.5
rollout_cpus: 0.5
seed: 5
command: [%s, %s, --min-step-seconds, "0.2"]
llm: {steps: 12, batch: 16, max_concurrency: 32, pool_capacity: 64}
`, pythontest.Python, trainer))))
	// Where each role ran, while it runs (a finished run lists none).
	var lr loopRun
	trainerNode, workerNodes := "", map[string]bool{}
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		lr = loopRun{}
		ctl.call("GET", "/v1/runs/"+loop, ctl.admin, nil, &lr)
		if lr.Status != "running" && lr.Status != "" {
			break
		}
		if lr.Progress.Node != "" {
			trainerNode = lr.Progress.Node
		}
		for _, w := range lr.Progress.RolloutWorkers {
			if w.Node != "" && w.State == "running" {
				workerNodes[w.Node] = true
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("LLM loop %s not done after 4m: %+v", loop, lr.Progress)
		}
	}
	if lr.Status != "completed" || lr.Progress.Loop == nil || lr.Progress.Loop.Step != 12 {
		t.Fatalf("LLM loop %s across hosts: %s/%s (%s %s), loop %+v", loop, lr.Status, lr.Progress.State, lr.Error, lr.Progress.Reason, lr.Progress.Loop)
	}
	elsewhere := 0
	for nd := range workerNodes {
		if nd != trainerNode && hosts[nd] != nil {
			elsewhere++
		}
	}
	if hosts[trainerNode] == nil || elsewhere == 0 || len(srv.Reloads()) == 0 {
		t.Fatalf("LLM loop: trainer on %q, workers on %v, %d reloads: want a worker on another host than the trainer's and announced weights", trainerNode, workerNodes, len(srv.Reloads()))
	}
	t.Logf("LLM loop %s: 12 steps, trainer on %s (%s), workers on %v; %d chat completions, %d reloads announced",
		loop, trainerNode, hosts[trainerNode].Addr, workerNodes, srv.Completed(), len(srv.Reloads()))
}
