package local

import (
	"reflect"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/resources"
)

func TestCluster(t *testing.T) {
	four := []resources.GPU{{Index: 0, Model: "A", VRAMMB: 1}, {Index: 1, Model: "A", VRAMMB: 1}, {Index: 2, Model: "A", VRAMMB: 1}, {Index: 3, Model: "A", VRAMMB: 1}}
	tests := []struct {
		name    string
		workers int
		gpus    []resources.GPU
		names   []string
		gpuIdx  [][]int
		err     string
	}{
		{name: "head only", workers: 0, gpus: four, names: []string{"head"}, gpuIdx: [][]int{{0}}},
		{name: "head and two workers", workers: 2, gpus: four, names: []string{"head", "worker-1", "worker-2"}, gpuIdx: [][]int{{0}, {1}, {2}}},
		{name: "no GPUs known", workers: 1, names: []string{"head", "worker-1"}, gpuIdx: [][]int{{}, {}}},
		{name: "more workers than GPUs", workers: 4, gpus: four, err: `no free GPU for node "worker-4"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Cluster("dev", tt.workers, tt.gpus)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, n := range c.Nodes {
				if n.Name != tt.names[i] || !reflect.DeepEqual(GPUs(n), tt.gpuIdx[i]) {
					t.Fatalf("node %d = %s %v, want %s %v", i, n.Name, GPUs(n), tt.names[i], tt.gpuIdx[i])
				}
			}
		})
	}
	// add_ray_worker.sh: the next worker takes the next free GPU, and the
	// one after the last GPU is refused.
	c, err := Cluster("dev", 2, four)
	if err != nil {
		t.Fatal(err)
	}
	n, err := AddWorker(c, four)
	if err != nil || n.Name != "worker-3" || !reflect.DeepEqual(GPUs(n), []int{3}) {
		t.Fatalf("AddWorker = %+v, %v", n, err)
	}
	if _, err := AddWorker(c, four); err == nil {
		t.Fatal("a fifth node got a GPU on a four-GPU machine")
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
