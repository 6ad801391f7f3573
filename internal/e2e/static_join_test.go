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
// node. `cluster join-token` mints a fresh token each time (the second
// node joins with one, listed in `cluster status` with its node); revoked,
// its agent is told why it is refused, exits non-zero after its refusals,
// `cluster status` shows the refused node and the reason, and the node on
// the cluster's own token goes on.
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
	// join-token makes a fresh token each time (its ID on stderr).
	fresh := func(label string) (token, id string) {
		t.Helper()
		c := exec.Command(binary, "cluster", "join-token", "fleet", "--label", label, "--data-dir", dev.dir)
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, err := c.Output()
		m := regexp.MustCompile(`join token ([0-9a-f]{12}) \(revoke: trainyard cluster join-token fleet --revoke ([0-9a-f]{12})\)`).FindStringSubmatch(stderr.String())
		if err != nil || m == nil || !strings.Contains(stderr.String(), "TRAINYARD_JOIN_SECRET="+strings.TrimSpace(string(out))+" trainyard agent") {
			t.Fatalf("cluster join-token: %v\n%s\n%s", err, out, stderr.String())
		}
		return strings.TrimSpace(string(out)), m[1]
	}
	copperToken, copperID := fresh("copper's")
	if other, _ := fresh("spare"); copperToken == cmds[0][2] || other == copperToken {
		t.Fatalf("join-token printed the same token twice (or cluster up's)")
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

	// copper's with the fresh token: it joins, and status lists the token
	// with its node.
	c, out := agent(strings.Replace(cmds[1][1], cmds[1][2], copperToken, 1), "--heartbeat-interval", "1s", "--max-refusals", "3")
	waitFor(t, func() bool {
		var st clusterStatus
		dev.call("GET", "/v1/clusters/fleet", dev.admin, nil, &st)
		return st.health("copper") == "Idle"
	})
	if status := cli(t, dev, "cluster", "status", "fleet"); !regexp.MustCompile(`(?m)^` + copperID + `\s+copper's\s+.*\scopper\s*$`).MatchString(status) {
		t.Errorf("cluster status does not list copper's token with its node:\n%s", status)
	}
	// An operator cannot revoke; unknown IDs and the cluster's own are refused.
	if code, _, raw := dev.call("DELETE", "/v1/clusters/fleet/join-tokens/"+copperID, op.Token, nil, nil); code != http.StatusForbidden {
		t.Fatalf("an operator revoked a join token: %d %s", code, raw)
	}
	if code, _, raw := dev.call("DELETE", "/v1/clusters/fleet/join-tokens/000000000000", dev.admin, nil, nil); code != http.StatusNotFound {
		t.Errorf("revoking an unknown token: %d %s, want 404", code, raw)
	}

	// Revoked: copper's agent is refused from its next heartbeat, told why,
	// and gives up; nickel, on the cluster's own token, goes on.
	cli(t, dev, "cluster", "join-token", "fleet", "--revoke", copperID)
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
	for _, want := range []string{"the cluster refuses this agent's heartbeats", "not signed with a join token of this cluster", "trainyard cluster join-token fleet"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the refused agent's log lacks %q:\n%s", want, out)
		}
	}
	status := cli(t, dev, "cluster", "status", "fleet")
	if !regexp.MustCompile(`(?m)^copper\s+\S+ \(pid \d+\)\s+[3-9]\d*\s+\S+\s+not signed with a join token of this cluster`).MatchString(status) {
		t.Fatalf("cluster status does not show the refused node:\n%s", status)
	}
	var st clusterStatus
	dev.call("GET", "/v1/clusters/fleet", dev.admin, nil, &st)
	if h := st.health("nickel"); h != "Idle" {
		t.Errorf("nickel, on the cluster's own token, is %s after another token's revocation", h)
	}
	t.Logf("cluster status fleet:\n%s", status)
}
