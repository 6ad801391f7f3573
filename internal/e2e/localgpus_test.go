package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeNvidiaSMI is a directory holding an nvidia-smi that lists as many
// H200s as the file count beside it says: on PATH, a dev's local agents
// see them as they would see real ones.
func fakeNvidiaSMI(t *testing.T) (dir string, set func(gpus int)) {
	t.Helper()
	dir = t.TempDir()
	script := `#!/bin/sh
n=$(cat "$(dirname "$0")/count")
i=0
while [ "$i" -lt "$n" ]; do echo "$i, NVIDIA H200, 143771, 0, 1"; i=$((i+1)); done
`
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	set = func(gpus int) {
		if err := os.WriteFile(filepath.Join(dir, "count"), fmt.Appendf(nil, "%d\n", gpus), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, set
}

// TestLocalGPUsAsDetected (issue 31): a local node offers the GPUs
// nvidia-smi reports (it got `--gpus none` and offered 0 of a real H200);
// local nodes split a machine's GPUs with provisioner.local.gpus; a node
// whose spec describes other GPUs than it has says so in `cluster status`;
// a job gets the physical indices it was given.
func TestLocalGPUsAsDetected(t *testing.T) {
	t.Parallel()
	smi, set := fakeNvidiaSMI(t)
	dev := startDevEnv(t, t.TempDir(), []string{"PATH=" + smi + string(os.PathListSeparator) + os.Getenv("PATH")})

	gpus := func(clusterName string) map[string]string {
		t.Helper()
		var st clusterStatus
		if code, _, raw := dev.call("GET", "/v1/clusters/"+clusterName, dev.admin, nil, &st); code != 200 {
			t.Fatalf("cluster %s: %d %s", clusterName, code, raw)
		}
		out := map[string]string{}
		for _, n := range st.Nodes {
			var s []string
			for _, g := range n.Resources.GPUs {
				s = append(s, fmt.Sprintf("%d:%s", g.Index, g.Model))
			}
			out[n.Name] = strings.Join(s, ",")
			if n.GPUsDiffer != "" {
				out[n.Name] += " / " + n.GPUsDiffer
			}
		}
		return out
	}
	visible := func(clusterName string, n int) string {
		t.Helper()
		id := strings.TrimSpace(cli(t, dev, "job", "submit", "--cluster", clusterName, "--gpus", fmt.Sprint(n), "--", "sh", "-c", "echo visible=$CUDA_VISIBLE_DEVICES"))
		return strings.TrimSpace(cli(t, dev, "job", "logs", "-f", id))
	}
	check := func(clusterName string, want map[string]string) {
		t.Helper()
		got := gpus(clusterName)
		for node, w := range want {
			if got[node] != w {
				t.Errorf("cluster %s node %s: GPUs %q, want %q", clusterName, node, got[node], w)
			}
		}
	}

	// Four GPUs: one node given two of them, one whose spec describes GPU
	// 2 as a TITAN X (a node given none would see all four: nodes that
	// share a machine split it by saying which GPUs are theirs).
	set(4)
	out := cli(t, dev, "cluster", "up", "-f", writeFile(t, "four.yaml", `
name: four
defaults: {provider: local, provisioner: {kind: local}}
nodes:
  - {name: gpu-a, provisioner: {kind: local, local: {gpus: [0, 1]}}}
  - {name: gpu-b, resources: {gpus: "2:TITAN X (Pascal):12GB"}}
`))
	check("four", map[string]string{
		"gpu-a": "0:NVIDIA H200,1:NVIDIA H200",
		"gpu-b": "2:NVIDIA H200 / the spec describes 1×TITAN X (Pascal); the agent reports 1×NVIDIA H200",
	})
	if !strings.Contains(out, "GPUs differ: the spec describes 1×TITAN X (Pascal); the agent reports 1×NVIDIA H200") {
		t.Errorf("cluster up's status does not say gpu-b's GPUs differ:\n%s", out)
	}
	if got := visible("four", 2); got != "visible=0,1" {
		t.Errorf("a 2-GPU job on four printed %q, want visible=0,1", got)
	}
	cli(t, dev, "cluster", "down", "four")

	// Two GPUs, one node that describes none: it offers both.
	set(2)
	cli(t, dev, "cluster", "up", "-f", writeFile(t, "two.yaml", `
name: two
defaults: {provider: local, provisioner: {kind: local}}
nodes: [{name: solo}]
`))
	check("two", map[string]string{"solo": "0:NVIDIA H200,1:NVIDIA H200"})
	if got := visible("two", 2); got != "visible=0,1" {
		t.Errorf("a 2-GPU job on two printed %q, want visible=0,1", got)
	}
}
