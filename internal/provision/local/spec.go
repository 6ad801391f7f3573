package local

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/resources"
)

// Kind is the provisioner kind's name in a spec.
const Kind = "local"

// Settings are `provisioner.local`: the physical GPU indices the node's
// agent may use. Local nodes of one cluster share a machine, so their sets
// must not overlap (seed 004: head GPU 0, worker i GPU i).
type Settings struct {
	GPUs []int `json:"gpus,omitempty"`
}

func init() {
	spec.Register(spec.Kind{Name: Kind, Check: check, CheckCluster: checkCluster, SharesMachine: true})
}

// SettingsOf decodes a local node's settings.
func SettingsOf(n spec.Node) (Settings, error) {
	var s Settings
	err := spec.DecodeSettings(n, &s)
	return s, err
}

// GPUs are the physical GPU indices the node's agent owns: its settings'
// list when given, else the expected GPUs' indices.
func GPUs(n spec.Node) []int {
	if s, err := SettingsOf(n); err == nil && len(s.GPUs) > 0 {
		return slices.Clone(s.GPUs)
	}
	idx := make([]int, len(n.Resources.GPUs))
	for i, g := range n.Resources.GPUs {
		idx[i] = g.Index
	}
	return idx
}

func check(n spec.Node, fail func(field, format string, a ...any)) {
	s, err := SettingsOf(n)
	if err != nil {
		fail("provisioner.local", "%v", err)
		return
	}
	seen := map[int]bool{}
	for _, g := range s.GPUs {
		if g < 0 || seen[g] {
			fail("provisioner.local.gpus", "index %d is negative or repeated", g)
		}
		seen[g] = true
	}
	if len(s.GPUs) > 0 && len(n.Resources.GPUs) > 0 {
		want := slices.Sorted(slices.Values(s.GPUs))
		have := make([]int, len(n.Resources.GPUs))
		for i, g := range n.Resources.GPUs {
			have[i] = g.Index
		}
		slices.Sort(have)
		if !slices.Equal(want, have) {
			fail("provisioner.local.gpus", "%v differs from the indices in resources.gpus %v", want, have)
		}
	}
}

// checkCluster: local nodes share this machine, so no GPU is given to two.
func checkCluster(nodes []spec.Node, fail func(node, field, format string, a ...any)) {
	owner := map[int]string{}
	for _, n := range nodes {
		for _, g := range GPUs(n) {
			if other, taken := owner[g]; taken && other != n.Name {
				fail(n.Name, "provisioner.local.gpus", "GPU %d is already given to local node %q", g, other)
			}
			owner[g] = n.Name
		}
	}
}

// Cluster is the spec `start_ray_cluster.sh N` described (seed 004): a
// head and `workers` workers on this machine, one GPU each, head GPU 0 and
// worker i GPU i. gpus are the machine's GPUs (from detect, or a --gpus
// description); with none, the nodes are CPU-only.
func Cluster(name string, workers int, gpus []resources.GPU) (*spec.Cluster, error) {
	if workers < 0 {
		return nil, fmt.Errorf("local cluster %q: %d workers", name, workers)
	}
	c := &spec.Cluster{Name: name}
	for i := 0; i <= workers; i++ {
		if _, err := AddWorker(c, gpus); err != nil {
			return nil, err
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// AddWorker appends the next local node to c, as `add_ray_worker.sh` did:
// the first node is "head", later ones "worker-N", each on the lowest GPU
// no local node owns. It fails when GPUs are known and none is free.
func AddWorker(c *spec.Cluster, gpus []resources.GPU) (spec.Node, error) {
	taken := map[int]bool{}
	names := map[string]bool{}
	for _, n := range c.Nodes {
		names[n.Name] = true
		if n.Provisioner.Kind == Kind {
			for _, g := range GPUs(n) {
				taken[g] = true
			}
		}
	}
	name := "head"
	for i := 1; names[name]; i++ {
		name = "worker-" + strconv.Itoa(i)
	}
	n := spec.Node{
		Name:        name,
		Address:     "127.0.0.1",
		Provider:    "local",
		Labels:      map[string]string{"role": "worker"},
		Provisioner: spec.Provisioner{Kind: Kind},
	}
	if name == "head" {
		n.Labels["role"] = "head"
	}
	if len(gpus) > 0 {
		free := -1
		for i, g := range gpus {
			if !taken[g.Index] && (free < 0 || g.Index < gpus[free].Index) {
				free = i
			}
		}
		if free < 0 {
			return spec.Node{}, fmt.Errorf("cluster %q: no free GPU for node %q: all %d GPUs are given to local nodes", c.Name, name, len(gpus))
		}
		n.Resources.GPUs = []resources.GPU{gpus[free]}
		n.Provisioner.Settings = spec.EncodeSettings(Settings{GPUs: []int{gpus[free].Index}})
	}
	c.Nodes = append(c.Nodes, n)
	return n, nil
}
