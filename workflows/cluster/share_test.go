package cluster

import (
	"slices"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/resources"
)

// TestAllocateGPUShare: four jobs asking for a quarter of a GPU share one
// device (the same index, so the same CUDA_VISIBLE_DEVICES), a fifth goes
// to the other device, whole-GPU jobs still get devices of their own, and
// the status lists a shared device once with how full it is.
func TestAllocateGPUShare(t *testing.T) {
	node := &nodeState{Health: Idle, Reported: resources.Capacity{CPUs: 64, MemoryMB: 1 << 20, GPUs: []resources.GPU{
		{Index: 0, Model: "A100", VRAMMB: 81920}, {Index: 1, Model: "A100", VRAMMB: 81920},
	}}}
	c := &controller{st: &State{Name: "lab", Order: []string{"n1"}, Nodes: map[string]*nodeState{"n1": node}}}
	alloc := func(id string, gpus int, share float64) Allocation {
		t.Helper()
		a, err := c.allocate(time.Time{}, AllocateRequest{JobID: id, CPUs: 1, MemoryMB: 100, GPUs: gpus, GPUShare: share})
		if err != nil {
			t.Fatalf("allocate %s: %v", id, err)
		}
		return a
	}
	var first []int
	for _, id := range []string{"q1", "q2", "q3", "q4"} {
		a := alloc(id, 0, 0.25)
		if len(a.GPUs) != 1 {
			t.Fatalf("%s: got GPUs %v, want one shared device", id, a.GPUs)
		}
		if first == nil {
			first = a.GPUs
		}
		if !slices.Equal(a.GPUs, first) {
			t.Fatalf("%s: got device %v, want the device the first quarter got (%v)", id, a.GPUs, first)
		}
	}
	if again := alloc("q2", 0, 0.25); !slices.Equal(again.GPUs, first) {
		t.Fatalf("retried allocate of q2 moved it: %v", again.GPUs)
	}
	fifth := alloc("q5", 0, 0.25)
	if len(fifth.GPUs) != 1 || fifth.GPUs[0] == first[0] {
		t.Fatalf("fifth quarter got %v; the first device (%v) is full", fifth.GPUs, first)
	}
	// Three quarters of the second device are free, but not a whole one.
	if _, err := c.allocate(time.Time{}, AllocateRequest{JobID: "whole", CPUs: 1, MemoryMB: 100, GPUs: 1}); err == nil {
		t.Fatal("a whole GPU was handed out while both devices are (partly) held")
	}
	st := c.status(node.LastBeat)
	u := st.Nodes[0].Used
	if len(u.GPUs) != 2 || st.Totals.GPUsUsed != 2 {
		t.Fatalf("used GPUs %v (total %d), want both devices once", u.GPUs, st.Totals.GPUsUsed)
	}
	parts := map[int]float64{}
	for _, p := range u.GPUParts {
		parts[p.Index] = p.Share
	}
	if parts[first[0]] != 1 || parts[fifth.GPUs[0]] != 0.25 {
		t.Fatalf("gpu parts %v, want device %d full and device %d a quarter", u.GPUParts, first[0], fifth.GPUs[0])
	}
	// The API's view of the status (admission, feasibility) sees the same.
	sn := st.SchedulerNodes()
	var held float64
	for _, a := range sn[0].Allocations {
		for _, g := range a.GPUs {
			held += g.Share
		}
	}
	if held != 1.25 {
		t.Fatalf("scheduler view holds %g GPUs, want 1.25", held)
	}
	for _, id := range []string{"q1", "q2", "q3", "q4", "q5"} {
		c.release(time.Time{}, id)
	}
	if a := alloc("whole", 1, 0); len(a.GPUs) != 1 {
		t.Fatalf("after release, whole GPU job got %v", a.GPUs)
	}
}
