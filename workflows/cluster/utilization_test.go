package cluster

import (
	"testing"

	"github.com/trainyard/trainyard/internal/resources"
)

// TestUtilization: allocation per node and over the cluster; GPU
// utilisation only where an agent measured it.
func TestUtilization(t *testing.T) {
	st := Status{Cluster: "lab", Nodes: []NodeStatus{
		{Name: "gpu", Resources: resources.Capacity{CPUs: 8, GPUs: []resources.GPU{{Index: 0, Model: "A", VRAMMB: 1}, {Index: 1, Model: "A", VRAMMB: 1}}},
			Used: Usage{CPUs: 2, GPUs: []int{1}}, GPUUtil: []int{10, 90}},
		{Name: "cpu", Resources: resources.Capacity{CPUs: 4}},
	}, Totals: Totals{CPUs: 12, CPUsUsed: 2, GPUs: 2, GPUsUsed: 1}}
	u := st.Utilization()
	if u.Cluster != "lab" || len(u.Nodes) != 2 || u.CPUPct < 16.6 || u.CPUPct > 16.7 || u.GPUPct != 50 || u.GPUUtil == nil || *u.GPUUtil != 50 {
		t.Fatalf("%+v", u)
	}
	g := u.Nodes[0]
	if g.CPUPct != 25 || g.GPUPct != 50 || g.GPUs[0].Allocated || !g.GPUs[1].Allocated || *g.GPUs[1].Util != 90 || *g.GPUUtil != 50 {
		t.Errorf("gpu node: %+v", g)
	}
	if c := u.Nodes[1]; c.GPUUtil != nil || c.GPUPct != 0 || len(c.GPUs) != 0 {
		t.Errorf("cpu node: %+v", c)
	}
}
