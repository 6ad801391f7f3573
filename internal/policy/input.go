package policy

import (
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/ledger"
	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/workspec"
)

// Input is what data.trainyard.admission sees. Everything is aggregated in
// Go first (usage totals, per-node used resources): raw records make
// decisions several times slower.
type Input struct {
	Work    Work    `json:"work"`
	Cluster Cluster `json:"cluster"`
	Usage   Usage   `json:"usage"`
	// Placement, when set, is a proposed placement to check (capacity
	// share, reserved GPUs, VRAM, ephemeral nodes for training).
	Placement []Placed `json:"placement,omitempty"`
}

// Work is the submission as policies see it.
type Work struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Trains says the kind trains a model (workspec.Trains: trainings and
	// sweep trials): the rules about training read it, so they count the
	// kinds the scheduler's filters count.
	Trains         bool       `json:"trains"`
	Config         string     `json:"config,omitempty"`
	Board          string     `json:"board,omitempty"`
	Priority       int        `json:"priority"`
	WaitingSeconds int64      `json:"waiting_seconds"`
	Roles          []Role     `json:"roles"`
	Providers      *Providers `json:"providers,omitempty"`
	// Capabilities the run grants its plugins, and the capabilities its env
	// plugin declares (policies/capabilities.rego).
	Capabilities       *Capabilities `json:"capabilities,omitempty"`
	PluginCapabilities []string      `json:"plugin_capabilities,omitempty"`
}

// Capabilities are a run's grants.
type Capabilities struct {
	HTTP     []string `json:"http"`
	HTTPRate float64  `json:"http_rate"`
}

// Role is one role's per-instance request.
type Role struct {
	Name      string  `json:"name"`
	Count     int     `json:"count"`
	CPUs      float64 `json:"cpus"`
	GPUs      float64 `json:"gpus"`
	MemoryMB  int64   `json:"memory_mb"`
	MinVRAMMB int     `json:"min_vram_mb,omitempty"`
}

// Providers are the work's provider preferences.
type Providers struct {
	Prefer []string `json:"prefer,omitempty"`
	Avoid  []string `json:"avoid,omitempty"`
}

// Cluster is the fleet summary.
type Cluster struct {
	Nodes []Node `json:"nodes"`
	// Endpoints are the cluster's inference endpoints (who serves them).
	Endpoints []Endpoint `json:"endpoints,omitempty"`
}

// Endpoint is an inference endpoint as policies see it.
type Endpoint struct {
	Name  string   `json:"name"`
	Nodes []string `json:"nodes"`
	GPUs  int      `json:"gpus"`
}

// Node is one node's capacity and what is in use.
type Node struct {
	Name      string  `json:"name"`
	Provider  string  `json:"provider,omitempty"`
	Ephemeral bool    `json:"ephemeral,omitempty"`
	CPUs      float64 `json:"cpus"`
	MemoryMB  int64   `json:"memory_mb"`
	GPUs      []GPU   `json:"gpus,omitempty"`
	Used      Used    `json:"used"`
}

// GPU is one device.
type GPU struct {
	Index  int `json:"index"`
	VRAMMB int `json:"vram_mb"`
}

// Used totals a node's allocations.
type Used struct {
	CPUs     float64 `json:"cpus"`
	MemoryMB int64   `json:"memory_mb"`
}

// Usage is the pre-aggregated quota state (see AggregateUsage).
type Usage struct {
	Tier1CapacitySeconds    float64            `json:"tier1_capacity_seconds"`
	Tier1GPUSecondsByConfig map[string]float64 `json:"tier1_gpu_seconds_by_config,omitempty"`
	RunningTrainingByConfig map[string]int     `json:"running_training_by_config,omitempty"`
}

// Placed is one role instance (or Count identical ones) of a proposed
// placement.
type Placed struct {
	Node     string      `json:"node"`
	Role     string      `json:"role"`
	Count    int         `json:"count,omitempty"`
	CPUs     float64     `json:"cpus"`
	MemoryMB int64       `json:"memory_mb"`
	GPUs     []PlacedGPU `json:"gpus,omitempty"`
}

// PlacedGPU is a share of one device.
type PlacedGPU struct {
	Index int     `json:"index"`
	Share float64 `json:"share"`
}

// WorkInput converts a validated spec. waitingSeconds is how long the work
// has been queued (starvation boost).
func WorkInput(id string, s workspec.Spec, waitingSeconds int64) Work {
	w := Work{ID: id, Kind: s.Kind, Trains: workspec.Trains(s.Kind), Config: s.Config, Board: s.Board, Priority: s.Priority, WaitingSeconds: waitingSeconds}
	for _, r := range s.Roles {
		w.Roles = append(w.Roles, Role{Name: r.Name, Count: r.Count, CPUs: r.CPUs, GPUs: r.GPUs, MemoryMB: r.MemoryMB, MinVRAMMB: r.MinVRAMMB})
	}
	if len(s.Providers.Prefer)+len(s.Providers.Avoid) > 0 {
		w.Providers = &Providers{Prefer: s.Providers.Prefer, Avoid: s.Providers.Avoid}
	}
	return w
}

// EndpointsInput is the policies' view of a cluster's inference endpoints.
func EndpointsInput(eps []inference.Endpoint) []Endpoint {
	if len(eps) == 0 {
		return nil
	}
	out := make([]Endpoint, len(eps))
	for i, e := range eps {
		out[i] = Endpoint{Name: e.Name, Nodes: e.Nodes, GPUs: e.GPUs}
	}
	return out
}

// ClusterInput summarises the scheduler's node view. Nodes that are not
// ready are left out: they can take no work.
func ClusterInput(nodes []scheduler.Node) Cluster {
	c := Cluster{Nodes: make([]Node, 0, len(nodes))}
	for _, n := range nodes {
		if !n.Ready() {
			continue
		}
		in := Node{Name: n.Name, Provider: n.Provider, Ephemeral: n.Ephemeral, CPUs: n.Capacity.CPUs, MemoryMB: n.Capacity.MemoryMB}
		for _, g := range n.Capacity.GPUs {
			in.GPUs = append(in.GPUs, GPU{Index: g.Index, VRAMMB: g.VRAMMB})
		}
		for _, a := range n.Allocations {
			in.Used.CPUs += a.CPUs
			in.Used.MemoryMB += a.MemoryMB
		}
		c.Nodes = append(c.Nodes, in)
	}
	return c
}

// PlacementInput converts scheduler assignments for a placement check.
func PlacementInput(as []scheduler.Assignment) []Placed {
	out := make([]Placed, len(as))
	for i, a := range as {
		out[i] = Placed{Node: a.Node, Role: a.Role, CPUs: a.CPUs, MemoryMB: a.MemoryMB}
		for _, g := range a.GPUs {
			out[i].GPUs = append(out[i].GPUs, PlacedGPU{Index: g.Index, Share: g.Share})
		}
	}
	return out
}

// tierOf classifies a scheduler node with the policy params.
func tierOf(p params.Params, n scheduler.Node) int { return p.TierOf(n.Capacity.TotalVRAMMB()) }

// Take counts a placement just admitted, so that the next work decided on
// the same snapshot sees it: its nodes' used CPUs and memory, and a
// training it starts for its config (one scheduling cycle decides a batch
// on one snapshot).
func (in *Input) Take(w Work, placed []Placed) {
	if len(placed) == 0 {
		return
	}
	at := make(map[string]int, len(in.Cluster.Nodes))
	for i, n := range in.Cluster.Nodes {
		at[n.Name] = i
	}
	for _, p := range placed {
		i, ok := at[p.Node]
		if !ok {
			continue
		}
		n := max(p.Count, 1)
		in.Cluster.Nodes[i].Used.CPUs += p.CPUs * float64(n)
		in.Cluster.Nodes[i].Used.MemoryMB += p.MemoryMB * int64(n)
	}
	if ledger.OneTrainingKind(w.Kind) {
		if in.Usage.RunningTrainingByConfig == nil {
			in.Usage.RunningTrainingByConfig = map[string]int{}
		}
		in.Usage.RunningTrainingByConfig[w.Config]++
	}
}
