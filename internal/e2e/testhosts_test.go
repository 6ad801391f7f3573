package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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
// without a restart, while a training run on it moves to the other host
// and loses nothing. deploy/compose's agent-1, with the environment
// `docker compose` gives it, joins cluster compose from a third host, and
// deploy/k8s's DaemonSet agent, with its pod's environment, cluster k8s
// from a fourth.
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

	keys := devS3Keys(t, dev)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for name, h := range hosts {
		startSystemdAgent(ctx, t, h, labAgentEnv(dev, name, token, keys))
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

	// deploy/k8s's DaemonSet, its pod's environment as Kubernetes builds it
	// from the base's ConfigMaps and Secrets (the overlay's values for this
	// control plane), on a fourth host, in cluster k8s (agent.env's).
	podHost := n.Host("gpu-node-1")
	cli(t, dev, "cluster", "up", "-f", writeFile(t, "k8s.yaml", "name: k8s\ndefaults: {provisioner: {kind: static}}\nnodes: [{name: gpu-node-1}]\n"), "--wait=false")
	podWork := t.TempDir()
	podEnv, podArgs := daemonSetEnv(t, "../../deploy/k8s/base", "agent.yaml", map[string]string{
		"TRAINYARD_TEMPORAL_ADDRESS":   dev.ep.Temporal,
		"TRAINYARD_TEMPORAL_NAMESPACE": "default",
		"TRAINYARD_S3_ENDPOINT":        dev.ep.S3,
		"TRAINYARD_S3_BUCKET":          dev.ep.Bucket,
		"TRAINYARD_WORK_DIR":           podWork, // the work volume's mount
	}, map[string]string{
		"trainyard-s3/AWS_ACCESS_KEY_ID":     keys.ID,
		"trainyard-s3/AWS_SECRET_ACCESS_KEY": keys.Secret,
		"trainyard-join/join-secret":         strings.TrimSpace(cli(t, dev, "cluster", "join-token", "k8s")),
		"fieldRef/spec.nodeName":             "gpu-node-1",
	})
	startAgentOn(ctx, t, podHost, "DaemonSet pod", append(podEnv, "PATH=/usr/bin:/bin", "HOME="+podWork), podWork, podArgs...)

	waitHealth("both agents joined", 2*time.Minute, func(h map[string]string) bool { return h["nickel"] == "Idle" && h["zinc"] == "Idle" })
	waitNodeIdleAt(t, dev, "compose", "agent-1", composeHost)
	waitNodeIdleAt(t, dev, "k8s", "gpu-node-1", podHost) // the DaemonSet's agent
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

	// A training host partitioned from the control plane for longer than
	// the heartbeat timeout: the node goes Dead, the run moves to the other
	// host and finishes, and once healed the node comes back without a
	// restart. The partitioned placement may train on (it cannot report):
	// nothing it writes late becomes the run's (checkpoint fencing, its
	// refusals tested in internal/training's TestLateSegmentIsFenced), so
	// every iteration is recorded once, none lost.
	id := strings.TrimSpace(cli(t, dev, "run", "train", "--cluster", "lab", "--detach", "--env", "CartPole-v1",
		"--iterations", "16", "--checkpoint-every", "2", "--seed", "3"))
	r := waitRun(t, dev, id, 3*time.Minute, func(r runView) bool { return trained(r) >= 4 && r.Progress.State == "running" })
	cutNode, other := r.Progress.Node, map[string]string{"nickel": "zinc", "zinc": "nickel"}[r.Progress.Node]
	cutHost := hosts[cutNode]
	if cutHost == nil {
		t.Fatalf("run %s on %q, not a test host", id, cutNode)
	}
	cut := time.Now()
	cutHost.PartitionFrom(n.Gateway)
	dead := waitHealth(cutNode+" dead behind a partition", time.Minute, func(h map[string]string) bool { return h[cutNode] == "Dead" })
	if h := health(); h[other] == "Dead" {
		t.Errorf("%s is Dead while only %s is partitioned", other, cutNode)
	}
	r = waitRun(t, dev, id, 2*time.Minute, func(r runView) bool { return r.Progress.Node == other && r.Progress.State == "running" })
	moved := time.Since(cut)
	cutHost.Heal()
	back := waitHealth(cutNode+" back after the partition heals", 2*time.Minute, func(h map[string]string) bool { return h[cutNode] != "Dead" })
	r = waitRun(t, dev, id, 3*time.Minute, func(r runView) bool { return r.Status != "running" })
	if r.Status != "completed" || r.Progress.State != "succeeded" {
		t.Fatalf("run %s after the partition: %s/%s: %s %s", id, r.Status, r.Progress.State, r.Error, r.Progress.Reason)
	}
	assertEveryIteration(t, r) // none lost, none twice
	t.Logf("partition of %s (heartbeat timeout 6 s): Dead after %v, run moved to %s after %v (lost segments %d, iterations lost 0, duplicated 0), %s back %v after the heal",
		cutNode, dead.Round(time.Second), other, moved.Round(time.Second), r.Progress.Failures, cutNode, back.Round(time.Second))
}

// s3Keys are S3 access keys as dev writes them.
type s3Keys struct {
	ID     string `json:"access_key_id"`
	Secret string `json:"secret_access_key"`
}

// devS3Keys are the operator's S3 keys: here the dev gateway's own.
func devS3Keys(t *testing.T, dev *devProc) s3Keys {
	t.Helper()
	var keys s3Keys
	if b, err := os.ReadFile(dev.ep.S3Credentials); err != nil || json.Unmarshal(b, &keys) != nil {
		t.Fatalf("dev's S3 credentials: %v", err)
	}
	return keys
}

// labAgentEnv is what an operator sets in deploy/systemd's agent.env for
// node of cluster lab on dev: its Temporal and S3, a join token, no GPUs,
// a heartbeat every 2 s.
func labAgentEnv(dev *devProc, node, token string, keys s3Keys) map[string]string {
	return map[string]string{
		"TRAINYARD_CLUSTER":            "lab",
		"TRAINYARD_NODE":               node,
		"TRAINYARD_TEMPORAL_ADDRESS":   dev.ep.Temporal,
		"TRAINYARD_JOIN_SECRET":        token,
		"TRAINYARD_GPUS":               "none",
		"TRAINYARD_HEARTBEAT_INTERVAL": "2s",
		"TRAINYARD_S3_ENDPOINT":        dev.ep.S3,
		"TRAINYARD_S3_BUCKET":          dev.ep.Bucket,
		"AWS_ACCESS_KEY_ID":            keys.ID,
		"AWS_SECRET_ACCESS_KEY":        keys.Secret,
	}
}

// waitNodeIdleAt waits until cluster's node is Idle, advertising h's
// address.
func waitNodeIdleAt(t *testing.T, dev *devProc, cluster, node string, h *testhosts.Host) {
	t.Helper()
	waitFor(t, func() bool {
		var st clusterStatus
		dev.call("GET", "/v1/clusters/"+cluster, dev.admin, nil, &st)
		for _, nd := range st.Nodes {
			if nd.Name == node {
				if nd.Health == "Idle" && nd.Address != h.Addr.String() {
					t.Errorf("%s/%s advertises %q, want its host's %s", cluster, node, nd.Address, h.Addr)
				}
				return nd.Health == "Idle"
			}
		}
		return false
	})
}

// startSystemdAgent starts an agent in h as deploy/systemd's unit starts
// it: its ExecStart, its Environment= lines and its environment file with
// set applied (the operator's edits), from a state dir of its own.
func startSystemdAgent(ctx context.Context, t *testing.T, h *testhosts.Host, set map[string]string) {
	t.Helper()
	unit := readUnit(t, "../../deploy/systemd/trainyard-agent.service")
	if unit.exec[0] != "/usr/local/bin/trainyard" {
		t.Fatalf("the unit runs %s, not the installed binary", unit.exec[0])
	}
	state := t.TempDir() // StateDirectory= and WorkingDirectory=
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + state}
	for _, kv := range unit.env {
		env = append(env, strings.ReplaceAll(kv, "/var/lib/trainyard-agent", state))
	}
	env = append(env, readEnvFile(t, "../../deploy/systemd/trainyard-agent.env", set)...)
	startAgentOn(ctx, t, h, "systemd "+set["TRAINYARD_NODE"], env, state, unit.exec[1:]...)
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

// daemonSetEnv builds the environment Kubernetes gives the first container
// of manifest (a workload in kustomization dir) and its args: envFrom in
// order (ConfigMaps from the kustomization's configMapGenerator env files,
// with set replacing values as an overlay would; Secrets' keys from
// values["SECRET/KEY"]), then env (value, secretKeyRef from
// values["SECRET/KEY"], fieldRef from values["fieldRef/PATH"]), later
// entries winning. A reference with no value fails t.
func daemonSetEnv(t *testing.T, dir, manifest string, set, values map[string]string) (env, args []string) {
	t.Helper()
	var kust struct {
		ConfigMapGenerator []struct {
			Name string   `yaml:"name"`
			Envs []string `yaml:"envs"`
		} `yaml:"configMapGenerator"`
	}
	readYAML(t, filepath.Join(dir, "kustomization.yaml"), &kust)
	configMaps := map[string][]string{}
	for _, g := range kust.ConfigMapGenerator {
		for _, f := range g.Envs {
			configMaps[g.Name] = append(configMaps[g.Name], readEnvFile(t, filepath.Join(dir, f), set)...)
		}
	}
	var ds struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Args    []string `yaml:"args"`
						EnvFrom []struct {
							ConfigMapRef *struct{ Name string } `yaml:"configMapRef"`
							SecretRef    *struct{ Name string } `yaml:"secretRef"`
						} `yaml:"envFrom"`
						Env []struct {
							Name      string `yaml:"name"`
							Value     string `yaml:"value"`
							ValueFrom *struct {
								FieldRef *struct {
									FieldPath string `yaml:"fieldPath"`
								} `yaml:"fieldRef"`
								SecretKeyRef *struct{ Name, Key string } `yaml:"secretKeyRef"`
							} `yaml:"valueFrom"`
						} `yaml:"env"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	readYAML(t, filepath.Join(dir, manifest), &ds)
	if len(ds.Spec.Template.Spec.Containers) == 0 {
		t.Fatalf("%s: no container", manifest)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	value := func(ref string) string {
		v, ok := values[ref]
		if !ok {
			t.Fatalf("%s references %s, which the test does not provide", manifest, ref)
		}
		return v
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			kvs, ok := configMaps[from.ConfigMapRef.Name]
			if !ok {
				t.Fatalf("%s: ConfigMap %s is not generated by the kustomization", manifest, from.ConfigMapRef.Name)
			}
			env = append(env, kvs...)
		case from.SecretRef != nil:
			for ref, v := range values {
				if name, key, _ := strings.Cut(ref, "/"); name == from.SecretRef.Name {
					env = append(env, key+"="+v)
				}
			}
		}
	}
	for _, e := range c.Env {
		v := e.Value
		if f := e.ValueFrom; f != nil {
			switch {
			case f.FieldRef != nil:
				v = value("fieldRef/" + f.FieldRef.FieldPath)
			case f.SecretKeyRef != nil:
				v = value(f.SecretKeyRef.Name + "/" + f.SecretKeyRef.Key)
			}
		}
		if nv, ok := set[e.Name]; ok {
			v = nv // a value the pod's volume mounts change (the work dir)
		}
		env = append(env, e.Name+"="+v)
	}
	return env, c.Args
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
