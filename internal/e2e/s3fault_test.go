package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/testhosts"
)

// TestTrainingThroughLossAndAnUnreachableS3 (issue 31), on a training
// host of its own: a run at 5% packet loss each way completes, the node
// never declared Dead; then S3 unreachable from the host for 60 s (its
// packets dropped both ways, the control plane still reachable): the run
// waits, says why in `run show`, and goes on once S3 is back, every
// iteration recorded once, its newest checkpoint whole (no partial one is
// ever listed).
func TestTrainingThroughLossAndAnUnreachableS3(t *testing.T) {
	t.Parallel()
	n := testhosts.New(t)
	dev := startDev(t, t.TempDir(), "--ip", n.Gateway.String())
	h := n.Host("nickel")
	cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", "name: lab\ndefaults: {provisioner: {kind: static}, resources: {cpus: 1}}\nnodes: [{name: nickel}]\n"), "--wait=false")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startSystemdAgent(ctx, t, h, labAgentEnv(dev, "nickel", strings.TrimSpace(cli(t, dev, "cluster", "join-token", "lab")), devS3Keys(t, dev)))
	waitNodeIdleAt(t, dev, "lab", "nickel", h)
	u, err := url.Parse(dev.ep.S3)
	if err != nil {
		t.Fatal(err)
	}
	s3, err := netip.ParseAddrPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}

	// 5% loss each way on the host's link for a whole run: it completes,
	// and the node never flaps to Dead (heartbeats every 2 s, Dead after
	// the default 15 s of silence).
	h.Loss(5)
	lossy := strings.TrimSpace(cli(t, dev, "run", "train", "--cluster", "lab", "--detach", "--env", "CartPole-v1",
		"--iterations", "12", "--checkpoint-every", "2", "--seed", "4"))
	healths := map[string]int{}
	r := waitRun(t, dev, lossy, 4*time.Minute, func(r runView) bool {
		var st clusterStatus
		dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st)
		for _, nd := range st.Nodes {
			healths[nd.Health]++
		}
		return r.Status != "running"
	})
	h.Heal()
	if r.Status != "completed" || healths["Dead"] > 0 {
		t.Fatalf("run %s at 5%% loss: %s/%s (%s); node health seen %v", lossy, r.Status, r.Progress.State, r.Error, healths)
	}
	assertEveryIteration(t, r)
	t.Logf("5%% loss on %s for a whole run: completed, %d lost segments, node health polled %v (never Dead)", h.Name, r.Progress.Failures, healths)

	id := strings.TrimSpace(cli(t, dev, "run", "train", "--cluster", "lab", "--detach", "--env", "CartPole-v1",
		"--iterations", "20", "--checkpoint-every", "2", "--seed", "3"))
	waitRun(t, dev, id, 3*time.Minute, func(r runView) bool { return trained(r) >= 4 && r.Progress.State == "running" })
	h.PartitionFromService(s3)
	cut := time.Now()
	said, shown := "", ""
	for time.Since(cut) < 60*time.Second {
		var r struct {
			Waiting string `json:"waiting"`
		}
		dev.call("GET", "/v1/runs/"+id, dev.admin, nil, &r)
		if said == "" && r.Waiting != "" {
			said = fmt.Sprintf("after %v: %s", time.Since(cut).Round(time.Second), r.Waiting)
			shown = cli(t, dev, "run", "show", id)
		}
		time.Sleep(time.Second)
	}
	h.Heal()
	healed := time.Now()
	if !strings.Contains(said, "S3 has not answered") || !strings.Contains(shown, "waiting on") {
		t.Errorf("the run never said it waits on S3 in 60 s without it (waiting %q); run show:\n%s", said, shown)
	}
	t.Logf("without S3, the run said %s", said)
	r = waitRun(t, dev, id, 4*time.Minute, func(r runView) bool { return r.Status != "running" })
	if r.Status != "completed" || (r.Progress.State != "succeeded" && r.Progress.State != "completed") {
		t.Fatalf("run %s after S3 came back: %s/%s: %s %s", id, r.Status, r.Progress.State, r.Error, r.Progress.Reason)
	}
	assertEveryIteration(t, r) // none lost, none twice
	// The newest checkpoint is whole: it downloads, every chunk's checksum good.
	cli(t, dev, "run", "download", id, "latest", "-d", t.TempDir())
	t.Logf("S3 unreachable from %s for 60 s: run %s finished %v after the heal; lost segments %d, iterations lost 0, duplicated 0",
		h.Name, id, time.Since(healed).Round(time.Second), r.Progress.Failures)
}
