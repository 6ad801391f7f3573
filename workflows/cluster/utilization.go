package cluster

// GPUAllocation is one GPU's allocation and utilisation.
type GPUAllocation struct {
	Index     int    `json:"index"`
	Model     string `json:"model,omitempty"`
	VRAMMB    int    `json:"vram_mb"`
	Allocated bool   `json:"allocated" doc:"A job holds it."`
	Util      *int   `json:"util,omitempty" doc:"Utilisation % as the agent reports it; absent where not measured."`
}

// NodeUtilization is one node's allocation.
type NodeUtilization struct {
	Name      string          `json:"name"`
	Health    string          `json:"health"`
	CPUs      float64         `json:"cpus"`
	CPUsUsed  float64         `json:"cpus_used"`
	CPUPct    float64         `json:"cpu_allocated_pct"`
	MemoryMB  int64           `json:"memory_mb"`
	MemUsedMB int64           `json:"memory_mb_used"`
	GPUs      []GPUAllocation `json:"gpus"`
	GPUPct    float64         `json:"gpu_allocated_pct"`
	GPUUtil   *float64        `json:"gpu_util_mean,omitempty" doc:"Mean reported GPU utilisation %; absent where not measured."`
	Jobs      []string        `json:"jobs,omitempty"`
}

// Utilization is a cluster's allocation.
type Utilization struct {
	Cluster string            `json:"cluster"`
	Nodes   []NodeUtilization `json:"nodes"`
	CPUPct  float64           `json:"cpu_allocated_pct"`
	GPUPct  float64           `json:"gpu_allocated_pct"`
	GPUUtil *float64          `json:"gpu_util_mean,omitempty"`
}

func pct(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * a / b
}

// Utilization is st's allocation: per node CPUs, memory and GPUs held,
// and the GPU utilisation the agents report.
func (st Status) Utilization() Utilization {
	u := Utilization{Cluster: st.Cluster, Nodes: []NodeUtilization{}}
	var utilSum, utilN float64
	for _, n := range st.Nodes {
		nu := NodeUtilization{Name: n.Name, Health: string(n.Health), CPUs: n.Resources.CPUs, CPUsUsed: n.Used.CPUs, MemoryMB: n.Resources.MemoryMB,
			MemUsedMB: n.Used.MemoryMB, GPUs: []GPUAllocation{}, Jobs: n.Jobs}
		nu.CPUPct = pct(nu.CPUsUsed, nu.CPUs)
		var alloc, sum, cnt float64
		for i, g := range n.Resources.GPUs {
			gu := GPUAllocation{Index: g.Index, Model: g.Model, VRAMMB: g.VRAMMB}
			for _, x := range n.Used.GPUs {
				gu.Allocated = gu.Allocated || x == g.Index
			}
			if gu.Allocated {
				alloc++
			}
			if i < len(n.GPUUtil) {
				v := n.GPUUtil[i]
				gu.Util = &v
				sum, cnt = sum+float64(v), cnt+1
			}
			nu.GPUs = append(nu.GPUs, gu)
		}
		nu.GPUPct = pct(alloc, float64(len(n.Resources.GPUs)))
		if cnt > 0 {
			m := sum / cnt
			nu.GPUUtil = &m
			utilSum, utilN = utilSum+sum, utilN+cnt
		}
		u.Nodes = append(u.Nodes, nu)
	}
	u.CPUPct = pct(st.Totals.CPUsUsed, st.Totals.CPUs)
	u.GPUPct = pct(float64(st.Totals.GPUsUsed), float64(st.Totals.GPUs))
	if utilN > 0 {
		m := utilSum / utilN
		u.GPUUtil = &m
	}
	return u
}
