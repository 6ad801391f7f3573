package cluster

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/resources"
)

// TestAllocateUsesTheRequestsPolicyParams: a request carrying the params
// of a pushed bundle that reserves GPU 0 of every node for inference gets
// GPU 1, a second one waits, and a request without params (recorded before
// the field, or from a caller without a bundle) places with the defaults.
func TestAllocateUsesTheRequestsPolicyParams(t *testing.T) {
	newCluster := func() *controller {
		node := &nodeState{Health: Idle, Reported: resources.Capacity{CPUs: 16, MemoryMB: 64000, GPUs: []resources.GPU{
			{Index: 0, Model: "A10G", VRAMMB: 23028}, {Index: 1, Model: "A10G", VRAMMB: 23028},
		}}}
		return &controller{st: &State{Name: "lab", Order: []string{"g5"}, Nodes: map[string]*nodeState{"g5": node}}}
	}
	p := params.Default()
	p.GPUPreservation.Enabled, p.GPUPreservation.ReservedPerNode = true, 1
	reserve, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}

	c := newCluster()
	a, err := c.allocate(time.Time{}, AllocateRequest{JobID: "train", CPUs: 1, GPUs: 1, Params: reserve})
	if err != nil || !slices.Equal(a.GPUs, []int{1}) {
		t.Fatalf("with GPU 0 reserved: got %v, %v; want GPU 1", a.GPUs, err)
	}
	if _, err := c.allocate(time.Time{}, AllocateRequest{JobID: "train-2", CPUs: 1, GPUs: 1, Params: reserve}); err == nil {
		t.Fatal("a second GPU job got the reserved GPU 0")
	}

	c = newCluster()
	if a, err := c.allocate(time.Time{}, AllocateRequest{JobID: "train", CPUs: 1, GPUs: 1}); err != nil || !slices.Equal(a.GPUs, []int{0}) {
		t.Fatalf("without params: got %v, %v; want GPU 0", a.GPUs, err)
	}

	if _, err := placementParams(AllocateRequest{JobID: "x", Params: json.RawMessage(`{"capacity_share": 7}`)}); err == nil {
		t.Fatal("params with capacity_share 7 accepted")
	}
}
