package cluster

import (
	"slices"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/resources"
)

// inferenceGPUs are the GPU indices of node that serve inference endpoints:
// the lowest `gpus` indices of each endpoint naming it (as
// policies/capabilities.rego reserves them). Deterministic (workflow code).
func inferenceGPUs(eps []inference.Endpoint, node string, gpus []resources.GPU) []int {
	n := 0
	for _, e := range eps {
		if slices.Contains(e.Nodes, node) {
			n = max(n, e.GPUs)
		}
	}
	if n == 0 || len(gpus) == 0 {
		return nil
	}
	idx := make([]int, len(gpus))
	for i, g := range gpus {
		idx[i] = g.Index
	}
	slices.Sort(idx)
	return idx[:min(n, len(idx))]
}
