package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestStaticAgentsJoin is how a static node joins, as its operator does
// it: `cluster up` of a spec with static nodes prints the join command of
// each (a cluster with static nodes used to print only "1 Pending", with
// no way to learn the token); the command, run as printed, joins its
// node; `cluster join-token` prints the same token again. An agent started
// without the token is told why it is refused, exits non-zero after its
// refusals, and `cluster status` shows the refused node and the reason.
func TestStaticAgentsJoin(t *testing.T) {
	t.Parallel()
	dev := startDev(t, t.TempDir())
	spec := writeFile(t, "static.yaml", `
name: fleet
defaults: {provider: lab, provisioner: {kind: static}, resources: {cpus: 1}}
nodes: [{name: nickel}, {name: copper}]
`)
	up := exec.Command(binary, "cluster", "up", "-f", spec, "--wait=false", "--data-dir", dev.dir)
	var stderr bytes.Buffer
	up.Stderr = &stderr
	if err := up.Run(); err != nil {
		t.Fatalf("cluster up: %v\n%s", err, stderr.String())
	}
	cmds := regexp.MustCompile(`(?m)^  (TRAINYARD_JOIN_SECRET=(\S+) trainyard agent --cluster fleet --node (\S+) --temporal-address \S+)$`).FindAllStringSubmatch(stderr.String(), -1)
	if len(cmds) != 2 || cmds[0][3] != "nickel" || cmds[1][3] != "copper" {
		t.Fatalf("cluster up did not print a join command per static node:\n%s", stderr.String())
	}
	if tok := strings.TrimSpace(cli(t, dev, "cluster", "join-token", "fleet")); tok != cmds[0][2] {
		t.Fatalf("cluster join-token printed %q, cluster up %q", tok, cmds[0][2])
	}
	// An operator cannot read it: it joins nodes.
	var op struct {
		Token string `json:"token"`
	}
	if code, _, raw := dev.call("POST", "/v1/tokens", dev.admin, map[string]string{"name": "ops", "role": "operator"}, &op); code != http.StatusCreated {
		t.Fatalf("create operator token: %d %s", code, raw)
	}
	if code, _, raw := dev.call("POST", "/v1/clusters/fleet/join-token", op.Token, nil, nil); code != http.StatusForbidden {
		t.Fatalf("an operator got the join token: %d %s", code, raw)
	}

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	agent := func(line string, extra ...string) (*exec.Cmd, *bytes.Buffer) {
		line = strings.Replace(line, "trainyard agent ", binary+" agent ", 1) + " --cpus 1 --gpus none " + strings.Join(extra, " ")
		c := exec.CommandContext(ctx, "sh", "-c", "exec env "+line)
		c.Dir = t.TempDir()
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return c, &out
	}
	// nickel's command as printed.
	agent(cmds[0][1])
	waitFor(t, func() bool {
		var st clusterStatus
		dev.call("GET", "/v1/clusters/fleet", dev.admin, nil, &st)
		for _, n := range st.Nodes {
			if n.Name == "nickel" {
				return n.Health == "Idle"
			}
		}
		return false
	})

	// copper's without the token: refused, told why, and it gives up.
	noToken := strings.TrimPrefix(cmds[1][1], "TRAINYARD_JOIN_SECRET="+cmds[1][2]+" ")
	c, out := agent(noToken, "--heartbeat-interval", "1s", "--max-refusals", "3")
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Fatalf("the refused agent exited %v:\n%s", err, out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the refused agent still runs after 60s:\n%s", out)
	}
	for _, want := range []string{"the cluster refuses this agent's heartbeats", "not signed with this cluster's join token", "trainyard cluster join-token fleet"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the refused agent's log lacks %q:\n%s", want, out)
		}
	}
	status := cli(t, dev, "cluster", "status", "fleet")
	if !regexp.MustCompile(`(?m)^copper\s+\S+ \(pid \d+\)\s+[3-9]\d*\s+\S+\s+not signed with this cluster's join token`).MatchString(status) {
		t.Fatalf("cluster status does not show the refused node:\n%s", status)
	}
	t.Logf("cluster status fleet:\n%s", status)
}
