package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/trainyard/trainyard/internal/testhosts"
)

// systemdUnit is what a systemd service file gives its process: the
// command (ExecStart) and the environment (Environment= lines, then each
// EnvironmentFile in its order), read the way systemd reads them for the
// keys our units use.
type systemdUnit struct {
	exec    []string
	env     []string // KEY=VALUE, later ones win
	envFile string
}

func readUnit(t *testing.T, path string) systemdUnit {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var u systemdUnit
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		switch k {
		case "ExecStart":
			u.exec = strings.Fields(v)
		case "Environment":
			u.env = append(u.env, v)
		case "EnvironmentFile":
			u.envFile = v
		}
	}
	if len(u.exec) == 0 || u.envFile == "" {
		t.Fatalf("%s: no ExecStart or EnvironmentFile", path)
	}
	return u
}

// readEnvFile reads an EnvironmentFile as systemd does (KEY=VALUE lines,
// # comments), with an operator's edits applied: set replaces a key's
// value (or adds it), as "then edit it" in the unit's install steps says.
func readEnvFile(t *testing.T, path string, set map[string]string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var env []string
	done := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("%s: not KEY=VALUE: %q", path, l)
		}
		if nv, ok := set[k]; ok {
			v, done[k] = nv, true
		}
		env = append(env, k+"="+v)
	}
	for k, v := range set {
		if !done[k] {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// TestSystemdAgentsOnTestHosts (issue 31): deploy/systemd's agent unit and
// its environment file, edited as its install steps say, start an agent on
// each of two test hosts that reach the control plane only over their own
// link. They join with the token `cluster join-token` printed, run jobs
// inside their host, and a host partitioned from the control plane for
// longer than the heartbeat timeout goes Dead and, healed, comes back
// without a restart. deploy/compose's agent-1, with the environment
// `docker compose` gives it, joins cluster compose from a third host.
func TestSystemdAgentsOnTestHosts(t *testing.T) {
	t.Parallel()
	n := testhosts.New(t)
	dev := startDev(t, t.TempDir(), "--ip", n.Gateway.String())
	hosts := map[string]*testhosts.Host{"nickel": n.Host("nickel"), "zinc": n.Host("zinc")}
	// No addresses in the spec: each agent advertises its own.
	spec := `
name: lab
defaults: {provider: lab, provisioner: {kind: static}, resources: {cpus: 1}}
nodes: [{name: nickel}, {name: zinc}]
`
	cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", spec), "--wait=false", "--heartbeat-timeout", "6s")
	token := strings.TrimSpace(cli(t, dev, "cluster", "join-token", "lab"))

	// The operator's S3 keys: here the dev gateway's own.
	var keys struct {
		ID     string `json:"access_key_id"`
		Secret string `json:"secret_access_key"`
	}
	if b, err := os.ReadFile(dev.ep.S3Credentials); err != nil || json.Unmarshal(b, &keys) != nil {
		t.Fatalf("dev's S3 credentials: %v", err)
	}
	unit := readUnit(t, "../../deploy/systemd/trainyard-agent.service")
	if unit.exec[0] != "/usr/local/bin/trainyard" {
		t.Fatalf("the unit runs %s, not the installed binary", unit.exec[0])
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for name, h := range hosts {
		state := t.TempDir() // StateDirectory= and WorkingDirectory=
		env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + state}
		for _, kv := range unit.env {
			env = append(env, strings.ReplaceAll(kv, "/var/lib/trainyard-agent", state))
		}
		env = append(env, readEnvFile(t, "../../deploy/systemd/trainyard-agent.env", map[string]string{
			"TRAINYARD_CLUSTER":            "lab",
			"TRAINYARD_NODE":               name,
			"TRAINYARD_TEMPORAL_ADDRESS":   dev.ep.Temporal,
			"TRAINYARD_JOIN_SECRET":        token,
			"TRAINYARD_GPUS":               "none",
			"TRAINYARD_HEARTBEAT_INTERVAL": "2s",
			"TRAINYARD_S3_ENDPOINT":        dev.ep.S3,
			"TRAINYARD_S3_BUCKET":          dev.ep.Bucket,
			"AWS_ACCESS_KEY_ID":            keys.ID,
			"AWS_SECRET_ACCESS_KEY":        keys.Secret,
		})...)
		startAgentOn(ctx, t, h, "systemd "+name, env, state, unit.exec[1:]...)
	}
	status := func() clusterStatus {
		var st clusterStatus
		dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st)
		return st
	}
	health := func() map[string]string {
		out := map[string]string{}
		for _, nd := range status().Nodes {
			out[nd.Name] = nd.Health
		}
		return out
	}
	waitHealth := func(what string, limit time.Duration, ok func(map[string]string) bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !ok(health()) {
			if time.Since(start) > limit {
				t.Fatalf("%s: not after %v: %v", what, limit, health())
			}
			time.Sleep(200 * time.Millisecond)
		}
		return time.Since(start)
	}
	// deploy/compose's agent-1, as `docker compose up` would start it with
	// the variables its header exports, in a cluster `compose` of its own
	// (deploy/README.md's spec), on a third host.
	composeHost := n.Host("agent-1")
	cli(t, dev, "cluster", "up", "-f", writeFile(t, "compose.yaml", "name: compose\ndefaults:\n  provisioner: {kind: static}\nnodes:\n  - name: agent-1\n  - name: agent-2\n"), "--wait=false")
	composeEnv, composeCmd := composeService(t, "../../deploy/compose/compose.yaml", "agent-1", map[string]string{
		"TRAINYARD_TEMPORAL_ADDRESS": dev.ep.Temporal,
		"TRAINYARD_S3_ENDPOINT":      dev.ep.S3,
		"AWS_ACCESS_KEY_ID":          keys.ID,
		"AWS_SECRET_ACCESS_KEY":      keys.Secret,
		"TRAINYARD_JOIN_SECRET":      strings.TrimSpace(cli(t, dev, "cluster", "join-token", "compose")),
	})
	startAgentOn(ctx, t, composeHost, "compose agent-1", append(composeEnv, "PATH=/usr/bin:/bin"), t.TempDir(), composeCmd...)

	waitHealth("both agents joined", 2*time.Minute, func(h map[string]string) bool { return h["nickel"] == "Idle" && h["zinc"] == "Idle" })
	waitFor(t, func() bool {
		var st clusterStatus
		dev.call("GET", "/v1/clusters/compose", dev.admin, nil, &st)
		for _, nd := range st.Nodes {
			if nd.Name == "agent-1" {
				if nd.Health == "Idle" && nd.Address != composeHost.Addr.String() {
					t.Errorf("compose agent-1 advertises %q, want %s", nd.Address, composeHost.Addr)
				}
				return nd.Health == "Idle"
			}
		}
		return false
	})
	for _, nd := range status().Nodes {
		if nd.Address != hosts[nd.Name].Addr.String() {
			t.Errorf("node %s advertises %q, want its host's address %s (the source of its route to the control plane)", nd.Name, nd.Address, hosts[nd.Name].Addr)
		}
	}

	// Jobs run inside their node's host: two jobs of a whole node's CPU at
	// once land one on each, and each sees only its host's address.
	var ids []string
	for range hosts {
		ids = append(ids, strings.TrimSpace(cli(t, dev, "job", "submit", "--cluster", "lab", "--cpus", "1", "--", "sh", "-c", "echo addresses: $(hostname -I); sleep 3")))
	}
	seen := map[string]bool{}
	var outs []string
	for _, id := range ids {
		out := strings.TrimSpace(cli(t, dev, "job", "logs", "-f", id))
		outs = append(outs, out)
		for name, h := range hosts {
			if out == "addresses: "+h.Addr.String() {
				seen[name] = true
			}
		}
	}
	if !seen["nickel"] || !seen["zinc"] {
		t.Errorf("jobs printed %q: want one on nickel and one on zinc, each seeing only its host's address", outs)
	}

	// A partition longer than the heartbeat timeout: Dead, then back.
	nickel := hosts["nickel"]
	nickel.PartitionFrom(n.Gateway)
	dead := waitHealth("nickel dead behind a partition", time.Minute, func(h map[string]string) bool { return h["nickel"] == "Dead" })
	if h := health(); h["zinc"] != "Idle" {
		t.Errorf("zinc is %s while only nickel is partitioned", h["zinc"])
	}
	time.Sleep(5 * time.Second) // well past the timeout
	nickel.Heal()
	back := waitHealth("nickel back after the partition heals", 2*time.Minute, func(h map[string]string) bool { return h["nickel"] == "Idle" })
	t.Logf("partition: nickel Dead %v after the cut (heartbeat timeout 6 s), Idle again %v after the heal", dead.Round(time.Second), back.Round(time.Second))
}

// startAgentOn runs the binary with args in host h, with exactly env, from
// dir; it is killed when t ends, and its output logged if t failed.
func startAgentOn(ctx context.Context, t *testing.T, h *testhosts.Host, what string, env []string, dir string, args ...string) {
	t.Helper()
	cmd := h.Command(ctx, binary, args...)
	cmd.Env, cmd.Dir = env, dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s log:\n%s", what, tail(out.String(), 3000))
		}
	})
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// composeService reads service's environment and command from a Compose
// file the way `docker compose` does for the keys ours use (anchors and
// merge keys, ${VAR}, ${VAR:-default}, ${VAR:?error} from vars), and fails
// t where a required variable is missing.
func composeService(t *testing.T, file, service string, vars map[string]string) (env, command []string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	svc, ok := doc.Services[service]
	if !ok || len(svc.Command) == 0 {
		t.Fatalf("%s: no service %s with a command", file, service)
	}
	ref := regexp.MustCompile(`\$\{([A-Z0-9_]+)(?::([-?])([^}]*))?\}`)
	for k, v := range svc.Environment {
		v = ref.ReplaceAllStringFunc(v, func(m string) string {
			p := ref.FindStringSubmatch(m)
			if val, ok := vars[p[1]]; ok && val != "" {
				return val
			}
			if p[2] == "?" {
				t.Fatalf("%s: %s: %s", file, p[1], p[3])
			}
			return p[3]
		})
		env = append(env, k+"="+v)
	}
	return env, svc.Command
}
