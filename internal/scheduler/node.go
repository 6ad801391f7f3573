// Package scheduler places admitted work on nodes. Placement is a pipeline
// of small stages, composed in New: feasibility filters reject nodes with a
// per-constraint reason, scorers rank the rest (bin-pack or spread, GPU tier,
// provider preference and cost), and the best node wins. Groups of roles are
// placed all-or-nothing. Nothing here reads the clock or does I/O: callers
// pass time in, so the package is safe inside deterministic workflow code.
package scheduler

import (
	"github.com/trainyard/trainyard/internal/resources"
)

// Health of a node as its agent last reported.
type Health string

// Health values; the zero value counts as Ready so a freshly filled Node
// is usable.
const (
	Ready    Health = "ready"
	Draining Health = "draining" // finishing work, takes no new work
	Down     Health = "down"     // missed heartbeats
)

// Node is the scheduler's view of a node: what it has and what already
// runs there. A cluster layer fills it from agent heartbeats.
type Node struct {
	Name        string             `json:"name"`
	Provider    string             `json:"provider,omitempty"`
	Labels      map[string]string  `json:"labels,omitempty"`
	Ephemeral   bool               `json:"ephemeral,omitempty"`
	Health      Health             `json:"health,omitempty"`
	Capacity    resources.Capacity `json:"capacity"`
	Allocations []Allocation       `json:"allocations,omitempty"`
	// InferenceGPUs are GPU indices serving the cluster's inference
	// endpoints: reserved like GPU preservation's own while it is enabled.
	InferenceGPUs []int `json:"inference_gpus,omitempty"`
}

// Ready says whether the node takes new work.
func (n Node) Ready() bool { return n.Health == "" || n.Health == Ready }

// Allocation is one placed role instance.
type Allocation struct {
	WorkID   string     `json:"work_id"`
	Role     string     `json:"role"`
	Instance int        `json:"instance"`
	Group    string     `json:"group,omitempty"`
	CPUs     float64    `json:"cpus"`
	MemoryMB int64      `json:"memory_mb"`
	GPUs     []GPUShare `json:"gpus,omitempty"`
	// Labels are matched by other roles' anti-affinity: work, role, kind,
	// config and the role's own labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// GPUShare is part (Share ≤ 1) or all of one device.
type GPUShare struct {
	Index int     `json:"index"`
	Share float64 `json:"share"`
}

// Assignment is an allocation and the node it is on.
type Assignment struct {
	Node string `json:"node"`
	Allocation
}
