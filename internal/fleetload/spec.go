package fleetload

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Node shapes. An agent reports its resources itself and the cluster
// places against what it reports, not the spec's, so a group's agents get
// the spec's CPUs, memory and GPUs as flags (the hollow agents of one
// process all report alike: one group per shape).
const (
	nodeCPUs     = 8
	nodeMemoryMB = 32 << 10
	gpuDesc      = "2xA100:80GB"
	gpusPerNode  = 2
	noGPUs       = "none"
)

// group is what one agent process (--simulate) or one set of real agent
// processes serves: nodes Prefix-From .. Prefix-(From+Count-1), all of
// one shape.
type group struct {
	Prefix string
	From   int
	Count  int
	GPUs   string // the agent's --gpus
}

// node is the name of the i-th node (0-based) of g, as `agent --simulate
// N --node PREFIX --simulate-from FROM` names them.
func (g group) node(i int) string { return fmt.Sprintf("%s-%d", g.Prefix, g.From+i) }

func (g group) nodes() []string {
	out := make([]string, g.Count)
	for i := range out {
		out[i] = g.node(i)
	}
	return out
}

// String names the group in logs: its first and last node.
func (g group) String() string {
	if g.Count == 1 {
		return g.node(0)
	}
	return fmt.Sprintf("%s..%d", g.node(0), g.From+g.Count-1)
}

// layout splits nodes prefix-1 .. prefix-n into groups: the last one in
// every gpuEvery have GPUs (rounded up, so even a 3-node fleet has one
// and GPU work is feasible; none when gpuEvery is 0), the others none,
// and each shape is split into parts processes (churn stops and restarts
// one process at a time).
func layout(prefix string, n, gpuEvery, parts int) []group {
	gpu := 0
	if gpuEvery > 0 {
		gpu = (n + gpuEvery - 1) / gpuEvery
	}
	out := split(group{Prefix: prefix, From: 1, Count: n - gpu, GPUs: noGPUs}, parts)
	return append(out, split(group{Prefix: prefix, From: n - gpu + 1, Count: gpu, GPUs: gpuDesc}, parts)...)
}

// split divides g into up to parts contiguous groups of near-equal size
// (empty ones dropped).
func split(g group, parts int) []group {
	parts = max(1, min(parts, g.Count))
	var out []group
	from := g.From
	for k := range parts {
		c := g.Count / parts
		if k < g.Count%parts {
			c++
		}
		if c == 0 {
			continue
		}
		p := g
		p.From, p.Count = from, c
		from += c
		out = append(out, p)
	}
	return out
}

// clusterSpec is the YAML of a cluster of static nodes, one per node of
// groups: the agents are ours to start, like an operator's.
func clusterSpec(name string, groups []group) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\n", name)
	fmt.Fprintf(&b, "defaults: {provider: hollow, provisioner: {kind: static}, resources: {cpus: %d, memory_mb: %d}}\n", nodeCPUs, nodeMemoryMB)
	b.WriteString("nodes:\n")
	for _, g := range groups {
		for _, n := range g.nodes() {
			if g.GPUs == noGPUs {
				fmt.Fprintf(&b, "  - {name: %s}\n", n)
				continue
			}
			fmt.Fprintf(&b, "  - {name: %s, resources: {cpus: %d, memory_mb: %d, gpus: %q}}\n", n, nodeCPUs, nodeMemoryMB, g.GPUs)
		}
	}
	return b.String()
}

// jobRole is a role of POST /v1/jobs's body (workspec.Role's JSON).
type jobRole struct {
	Name     string   `json:"name"`
	Count    int      `json:"count"`
	CPUs     float64  `json:"cpus"`
	GPUs     float64  `json:"gpus,omitempty"`
	MemoryMB int64    `json:"memory_mb"`
	Group    string   `json:"group,omitempty"`
	Command  []string `json:"command,omitempty"`
}

type jobGroup struct {
	Name     string `json:"name"`
	Strategy string `json:"strategy"`
}

// jobBody is POST /v1/jobs's body: a work description (workspec.Spec's
// JSON) on a cluster.
type jobBody struct {
	Cluster  string     `json:"cluster"`
	Kind     string     `json:"kind"`
	Config   string     `json:"config,omitempty"`
	Priority int        `json:"priority,omitempty"`
	Roles    []jobRole  `json:"roles"`
	Groups   []jobGroup `json:"groups,omitempty"`
}

// jobSpec is one job the load submits and what it should do.
type jobSpec struct {
	Body     jobBody
	Kind     string        // the mix's name for it: cpu, gang, gpu-share, gpu
	Duration time.Duration // how long each instance sleeps
	Exit     int           // its exit code
}

// Configs are game configurations without quotas in the shipped policy:
// a config with a Tier-1 quota (hexagonal_4p, square8_*) would make the
// GPU jobs wait for the quota window (24 h) once it is used up.
var configs = []string{"", "cartpole", "pendulum", "acrobot"}

var priorities = []int{0, 0, 0, 5, 10}

// mix draws job i of the load: mostly one-CPU jobs, gangs of 2-8 placed
// all-or-nothing (PACK or SPREAD: STRICT_SPREAD of 8 could never fit a
// small fleet), shares of one GPU (0.25, 0.5) and whole GPUs (1, 2), a
// few exiting non-zero. gpus says whether the fleet has GPU nodes.
func mix(r *rand.Rand, cluster string, minD, maxD time.Duration, gpus bool) jobSpec {
	d := minD
	if maxD > minD {
		d += time.Duration(r.Int64N(int64(maxD - minD + 1)))
	}
	d = d.Round(100 * time.Millisecond)
	j := jobSpec{Duration: d, Body: jobBody{Cluster: cluster, Kind: "job", Config: configs[r.IntN(len(configs))], Priority: priorities[r.IntN(len(priorities))]}}
	if r.IntN(20) == 0 {
		j.Exit = 3
	}
	role := jobRole{Name: "job", Count: 1, CPUs: 1, MemoryMB: 256 * int64(1+r.IntN(8))}
	p := r.IntN(100)
	switch {
	case p < 15:
		j.Kind = "gang"
		role.Name, role.Count, role.Group = "worker", 2+r.IntN(7), "gang"
		strategy := "PACK"
		if r.IntN(2) == 0 {
			strategy = "SPREAD"
		}
		j.Body.Groups = []jobGroup{{Name: "gang", Strategy: strategy}}
	case gpus && p < 30:
		j.Kind = "gpu-share"
		role.GPUs = []float64{0.25, 0.5}[r.IntN(2)]
	case gpus && p < 40:
		j.Kind = "gpu"
		role.CPUs, role.GPUs = 2, float64(1+r.IntN(gpusPerNode))
	default:
		j.Kind = "cpu"
		role.CPUs = float64(1 + r.IntN(2))
	}
	role.Command = command(d, j.Exit)
	j.Body.Roles = []jobRole{role}
	return j
}

// command sleeps d and exits with code: what a hollow node simulates
// instead of forking, and what a real agent runs.
func command(d time.Duration, code int) []string {
	secs := fmt.Sprintf("%g", d.Seconds())
	if code == 0 {
		return []string{"sleep", secs}
	}
	return []string{"sh", "-c", fmt.Sprintf("sleep %s; exit %d", secs, code)}
}
