package cluster

import (
	"fmt"
	"slices"
	"strings"

	"github.com/trainyard/trainyard/internal/resources"
)

// gpusDiffer says how the GPUs an agent reports differ from the ones its
// spec describes ("" when they match, or the spec describes none): seed
// 001's operators ssh into each box and run nvidia-smi to learn what it
// really has. Models match loosely (nvidia-smi says "NVIDIA H200" where a
// spec says "H200"); memory is not compared (MiB against a rounded GB).
func gpusDiffer(described, reported []resources.GPU) string {
	if len(described) == 0 || slices.Equal(gpuModels(described), gpuModels(reported)) {
		return ""
	}
	return fmt.Sprintf("the spec describes %s; the agent reports %s", gpuSummary(described), gpuSummary(reported))
}

func gpuModels(gs []resources.GPU) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		m := strings.ToLower(strings.TrimSpace(g.Model))
		for _, p := range []string{"nvidia ", "geforce "} {
			m = strings.TrimPrefix(m, p)
		}
		out[i] = m
	}
	slices.Sort(out)
	return out
}

// gpuSummary: "2×H200, 1×TITAN X", or "no GPUs".
func gpuSummary(gs []resources.GPU) string {
	if len(gs) == 0 {
		return "no GPUs"
	}
	var order []string
	n := map[string]int{}
	for _, g := range gs {
		if n[g.Model] == 0 {
			order = append(order, g.Model)
		}
		n[g.Model]++
	}
	parts := make([]string, len(order))
	for i, m := range order {
		parts[i] = fmt.Sprintf("%d×%s", n[m], m)
	}
	return strings.Join(parts, ", ")
}
