// Package spec is the cluster description a user writes (YAML, or JSON
// through the API): which nodes exist, what they are expected to offer, and
// how their agents are started.
package spec

import (
	"slices"

	"github.com/trainyard/trainyard/internal/agent/detect/gpudesc"
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/resources"
)

// Provisioner kinds.
const (
	KindLocal  = "local"  // agents are processes on the control-plane machine
	KindSSH    = "ssh"    // agents are copied to and started on a host over SSH
	KindStatic = "static" // agents are started by the operator (systemd, DaemonSet)
)

// Kinds lists the provisioner kinds a spec may name.
var Kinds = []string{KindLocal, KindSSH, KindStatic}

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

// Provisioner says how the node's agent is started; only the settings of
// its Kind are set.
type Provisioner struct {
	Kind  string `json:"kind"`
	SSH   *SSH   `json:"ssh,omitempty"`
	Local *Local `json:"local,omitempty"`
}

// SSH settings; empty fields take the provisioner's defaults (port 22, the
// current user, ~/.ssh/id_ed25519, ~/.ssh/known_hosts,
// .trainyard/agents/<node> under the remote home).
type SSH struct {
	User           string `json:"user,omitempty" yaml:"user,omitempty"`
	Port           int    `json:"port,omitempty" yaml:"port,omitempty"`
	KeyPath        string `json:"key,omitempty" yaml:"key,omitempty"`
	KnownHostsPath string `json:"known_hosts,omitempty" yaml:"known_hosts,omitempty"`
	RemoteDir      string `json:"remote_dir,omitempty" yaml:"remote_dir,omitempty"`
}

// Local settings: the physical GPU indices this agent may use. Local nodes
// of one cluster share a machine, so their sets must not overlap (seed 004:
// head GPU 0, worker i GPU i).
type Local struct {
	GPUs []int `json:"gpus,omitempty" yaml:"gpus,omitempty"`
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

// GPUIndices are the physical GPU indices the node's agent owns: the local
// provisioner's list when given, else the expected GPUs' indices.
func (n Node) GPUIndices() []int {
	if n.Provisioner.Local != nil && len(n.Provisioner.Local.GPUs) > 0 {
		return slices.Clone(n.Provisioner.Local.GPUs)
	}
	idx := make([]int, len(n.Resources.GPUs))
	for i, g := range n.Resources.GPUs {
		idx[i] = g.Index
	}
	return idx
}
