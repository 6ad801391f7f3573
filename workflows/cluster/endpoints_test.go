package cluster

import (
	"slices"
	"testing"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/resources"
)

func TestInferenceGPUs(t *testing.T) {
	gpus := []resources.GPU{{Index: 3}, {Index: 1}, {Index: 2}}
	eps := []inference.Endpoint{{Name: "llm", Nodes: []string{"a", "b"}, GPUs: 2}, {Name: "judge", Nodes: []string{"b"}, GPUs: 1}}
	for _, tc := range []struct {
		node string
		gpus []resources.GPU
		want []int
	}{
		{"a", gpus, []int{1, 2}},
		{"b", gpus, []int{1, 2}}, // endpoints on one node share its lowest GPUs
		{"c", gpus, nil},
		{"a", gpus[:1], []int{3}},
		{"a", nil, nil},
	} {
		if got := inferenceGPUs(eps, tc.node, tc.gpus); !slices.Equal(got, tc.want) {
			t.Errorf("inferenceGPUs(%s, %v) = %v, want %v", tc.node, tc.gpus, got, tc.want)
		}
	}
}
