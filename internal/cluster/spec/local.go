package spec

import (
	"fmt"
	"strconv"

	"github.com/trainyard/trainyard/internal/resources"
)

// LocalCluster is the spec `start_ray_cluster.sh N` described (seed 004):
// a head and `workers` workers on this machine, one GPU each, head GPU 0 and
// worker i GPU i. gpus are the machine's GPUs (from detect, or a --gpus
// description); with none, the nodes are CPU-only.
func LocalCluster(name string, workers int, gpus []resources.GPU) (*Cluster, error) {
	if workers < 0 {
		return nil, fmt.Errorf("local cluster %q: %d workers", name, workers)
	}
	c := &Cluster{Name: name}
	for i := 0; i <= workers; i++ {
		if _, err := AddLocalWorker(c, gpus); err != nil {
			return nil, err
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// AddLocalWorker appends the next local node to c, as `add_ray_worker.sh`
// did: the first node is "head", later ones "worker-N", each on the lowest
// GPU no local node owns. It fails when GPUs are known and none is free.
func AddLocalWorker(c *Cluster, gpus []resources.GPU) (Node, error) {
	taken := map[int]bool{}
	names := map[string]bool{}
	for _, n := range c.Nodes {
		names[n.Name] = true
		if n.Provisioner.Kind == KindLocal {
			for _, g := range n.GPUIndices() {
				taken[g] = true
			}
		}
	}
	name := "head"
	for i := 1; names[name]; i++ {
		name = "worker-" + strconv.Itoa(i)
	}
	n := Node{
		Name:        name,
		Address:     "127.0.0.1",
		Provider:    "local",
		Labels:      map[string]string{"role": "worker"},
		Provisioner: Provisioner{Kind: KindLocal, Local: &Local{}},
	}
	if name == "head" {
		n.Labels["role"] = "head"
	}
	if len(gpus) > 0 {
		free := -1
		for _, g := range gpus {
			if !taken[g.Index] && (free < 0 || g.Index < gpus[free].Index) {
				free = indexOf(gpus, g.Index)
			}
		}
		if free < 0 {
			return Node{}, fmt.Errorf("cluster %q: no free GPU for node %q: all %d GPUs are given to local nodes", c.Name, name, len(gpus))
		}
		n.Resources.GPUs = []resources.GPU{gpus[free]}
		n.Provisioner.Local.GPUs = []int{gpus[free].Index}
	}
	c.Nodes = append(c.Nodes, n)
	return n, nil
}

func indexOf(gpus []resources.GPU, index int) int {
	for i, g := range gpus {
		if g.Index == index {
			return i
		}
	}
	return -1
}
