package e2e

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/testhosts"
)

// TestSeveralMachinesQuickStart (issue 31) runs deploy/README.md's
// "Several machines" quick start verbatim: the control machine's blocks
// here, against a `trainyard dev` bound to the test network's gateway (the
// section's first block, which it does not run), and each box's blocks on
// a test host of its own, from a directory holding what the section copies
// to it. A box's agent reaches the control plane only over its host's link.
func TestSeveralMachinesQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("trains CartPole to 475 on two test hosts")
	}
	t.Parallel()
	n := testhosts.New(t)
	var blocks []docBlock
	for _, b := range runnableBlocks(t, "../../deploy/README.md") {
		if b.section == "Several machines: a quick start" {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) < 4 {
		t.Fatalf("deploy/README.md's several-machines quick start has %d runnable blocks", len(blocks))
	}
	dir := checkout(t)
	dev := startDev(t, filepath.Join(dir, ".trainyard"), "--ip", n.Gateway.String())
	env := docEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	var here []docBlock // this machine's blocks not run yet, in order
	hosts := map[string]*testhosts.Host{}
	for _, b := range blocks {
		if b.host == "" {
			here = append(here, b)
			continue
		}
		if len(here) > 0 {
			runDocs(t, ctx, dir, env, here)
			here = nil
		}
		if hosts[b.host] == nil {
			hosts[b.host] = n.Host(b.host)
		}
		startBlockOn(ctx, cancel, t, hosts[b.host], b, dir, env)
	}
	runDocs(t, ctx, dir, env, here)

	// Each box advertises its own host's address, the one its peers use.
	var st clusterStatus
	dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st)
	for _, nd := range st.Nodes {
		if h := hosts[nd.Name]; h == nil || nd.Address != h.Addr.String() {
			t.Errorf("node %s advertises %q, want its host's address (%v)", nd.Name, nd.Address, h)
		}
	}
}

// startBlockOn runs a box's block on h until t ends, from a directory of
// its own holding the files the walk-through copies from the control
// machine's dir (agent.env). A block that ends before t does fails t and
// cancels the walk-through, which would otherwise wait for its node.
func startBlockOn(ctx context.Context, cancel context.CancelFunc, t *testing.T, h *testhosts.Host, b docBlock, from string, env []string) {
	t.Helper()
	box := t.TempDir()
	for _, f := range []string{"agent.env"} {
		data, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			t.Fatalf("%s: the file the walk-through copies to %s: %v", b.at, b.host, err)
		}
		if err := os.WriteFile(filepath.Join(box, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := h.Command(ctx, "bash", "-eo", "pipefail", "-c", b.code)
	cmd.Dir, cmd.Env = box, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the block's children die with it
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s, on %s (%s):\n%s", b.at, b.host, h.Addr, indent(b.code, "  $ "))
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		err := cmd.Wait()
		select {
		case <-done:
		default:
			t.Errorf("%s, on %s: ended before the walk-through did: %v\n%s", b.at, b.host, err, tail(out.String(), 3000))
			cancel()
		}
		close(ended)
	}()
	t.Cleanup(func() {
		close(done)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-ended
		if t.Failed() {
			t.Logf("%s, on %s: its output:\n%s", b.at, b.host, tail(out.String(), 3000))
		}
	})
}
