package scheduler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/workspec"
)

// Seed000Pool is the seed-000 cluster: 6 × g5.2xlarge (7.5 CPUs, 30 GB,
// one A10G) and 2 large CPU nodes (63.5 CPUs, 127 GB).
func seed000Pool() []Node {
	var nodes []Node
	for i := 1; i <= 6; i++ {
		n := node(fmt.Sprintf("g5-%d", i), "aws", 7.5, 30, 23028)
		n.Labels = map[string]string{"instance-type": "g5.2xlarge"}
		nodes = append(nodes, n)
	}
	for i := 1; i <= 2; i++ {
		nodes = append(nodes, node(fmt.Sprintf("cpu-%d", i), "aws", 63.5, 127))
	}
	return nodes
}

const seed000Spec = `
name: zelda-production
kind: rollout
config: zelda
rollout: {workers: 7, envs_per_worker: 12, episode_length: 61440, batch_size: 32768}
roles:
  - name: rollout_worker
    cpus: 6
    memory_mb: 24000
    gpus: 0
    max_concurrency: 100
    anti_affinity: [{key: role, values: [rollout_worker]}]
`

// TestSeed000Placement: 7 workers, one per node (anti-affinity), each at
// 80% of a g5.2xlarge, on all six GPU nodes plus one CPU node, using no GPU
// (all six preserved for inference).
func TestSeed000Placement(t *testing.T) {
	spec, err := workspec.Parse([]byte(seed000Spec))
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	p := paramsWith(t, func(p *params.Params) {
		p.GPUPreservation.Enabled = true
		p.GPUPreservation.ReservedPerNode = 1
	})
	pl := New(p).Place(seed000Pool(), Work{ID: "zelda", Spec: spec})
	mustStatus(t, pl, Placed)
	if len(pl.Assignments) != 7 {
		t.Fatalf("%d assignments, want 7", len(pl.Assignments))
	}
	used := map[string]bool{}
	cpu, mem := 0.0, int64(0)
	for _, a := range pl.Assignments {
		if used[a.Node] {
			t.Errorf("two workers on %s despite anti-affinity", a.Node)
		}
		used[a.Node] = true
		if len(a.GPUs) != 0 {
			t.Errorf("worker on %s got GPUs %v", a.Node, a.GPUs)
		}
		cpu += a.CPUs
		mem += a.MemoryMB
	}
	for i := 1; i <= 6; i++ {
		if !used[fmt.Sprintf("g5-%d", i)] {
			t.Errorf("g5-%d unused; the seed puts one worker on every GPU node", i)
		}
	}
	if used["cpu-1"] == used["cpu-2"] {
		t.Errorf("CPU nodes used: cpu-1=%v cpu-2=%v, want exactly one", used["cpu-1"], used["cpu-2"])
	}
	if cpu != 42 || mem != 168000 {
		t.Errorf("total %g CPUs / %d MB", cpu, mem)
	}
	// An eighth worker fits on the last CPU node, a ninth nowhere: every
	// node already runs one.
	spec.Roles[0].Count = 9
	pl = New(p).Place(seed000Pool(), Work{ID: "zelda9", Spec: spec})
	mustStatus(t, pl, Infeasible)
	if !strings.Contains(pl.Reason, "anti_affinity") {
		t.Errorf("reason %q does not name anti-affinity", pl.Reason)
	}
	// Asking for the 90% ceiling is fine; above it is never placeable.
	spec.Roles[0].Count, spec.Roles[0].CPUs = 1, 7
	pl = New(p).Place(seed000Pool()[:6], Work{ID: "greedy", Spec: spec})
	mustStatus(t, pl, Infeasible)
}
