// Package spec is the cluster description a user writes (YAML, or JSON
// through the API): which nodes exist, what they are expected to offer, and
// how their agents are started.
package spec

import (
	"github.com/trainyard/trainyard/internal/agent/detect/gpudesc"
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/resources"
)

// Cluster is a validated cluster spec.
type Cluster struct {
	Name  string `json:"name"`
	Nodes []Node `json:"nodes"`
	// Endpoints are the OpenAI-compatible inference services runs may
	// grant their plugins (endpoints.go).
	Endpoints []inference.Endpoint `json:"endpoints,omitempty"`
}

// Node is one machine and how to reach it. Defaults from the spec's
// `defaults:` section are already applied.
type Node struct {
	Name     string            `json:"name"`
	Address  string            `json:"address,omitempty"`
	Provider string            `json:"provider,omitempty"` // lab, vast, runpod, nebius, vultr, k8s, local, ...
	Labels   map[string]string `json:"labels,omitempty"`
	// Ephemeral nodes can vanish without warning (spot / marketplace
	// machines); schedulers keep work on them short.
	Ephemeral bool `json:"ephemeral,omitempty"`
	// PreemptionNotice is where the agent watches for the provider's
	// warning before a spot machine is reclaimed ("aws", "gcp", a URL; see
	// internal/agent/preempt), to checkpoint its work in time.
	PreemptionNotice string `json:"preemption_notice,omitempty"`
	// JobUser is the account the agent runs jobs as (its --job-user), so
	// they cannot read what the agent holds; empty: the agent's own.
	JobUser string `json:"job_user,omitempty"`
	// Resources are what the node is expected to have. Zero CPUs or memory
	// mean "unknown until the agent reports"; GPU indices are physical
	// (nvidia-smi) indices.
	Resources   resources.Capacity `json:"resources"`
	Provisioner Provisioner        `json:"provisioner"`
}

// Node looks a node up by name.
func (c *Cluster) Node(name string) (Node, bool) {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// Capacity sums the expected resources of all nodes.
func (c *Cluster) Capacity() resources.Capacity {
	var t resources.Capacity
	for _, n := range c.Nodes {
		t.CPUs += n.Resources.CPUs
		t.MemoryMB += n.Resources.MemoryMB
		t.GPUs = append(t.GPUs, n.Resources.GPUs...)
	}
	return t
}

// GPUDescription is the node's expected GPUs in gpudesc syntax, ready for
// `trainyard agent --gpus` ("none" for a GPU-less node).
func (n Node) GPUDescription() string { return gpudesc.Format(n.Resources.GPUs) }
