package scheduler

import (
	"slices"

	"github.com/trainyard/trainyard/internal/policy/params"
)

// nodeState is a node plus the running totals the filters and scorers
// read, updated as a round places work.
type nodeState struct {
	node  *Node
	nid   int // the node's name among the cluster's (see cluster.nid)
	ready bool
	// ephemeral: the node or its provider can vanish.
	ephemeral bool
	prov      int // the provider among the cluster's (cluster.provs)
	health    int // the health's number in cluster.strs
	// memo holds the last shared rejections written for this node.
	memo     [4]memoEntry
	memoNext int
	usedCPU  float64
	usedMem  int64
	gpus     []gpuState
	tier     int
	vramMax  int
	allocs   []Allocation // existing plus placed this round
	capShare float64
}

type gpuState struct {
	index    int
	vramMB   int
	reserved bool
	used     float64 // 0..1
}

func newNodeState(n *Node, p *params.Params, empty bool) *nodeState {
	s := &nodeState{node: n, ready: n.Ready(), capShare: p.CapacityShare,
		ephemeral: n.Ephemeral || p.EphemeralProvider(n.Provider)}
	indices := make([]int, len(n.Capacity.GPUs))
	for i, g := range n.Capacity.GPUs {
		indices[i] = g.Index
	}
	s.gpus = make([]gpuState, 0, len(n.Capacity.GPUs))
	for _, g := range n.Capacity.GPUs {
		s.gpus = append(s.gpus, gpuState{index: g.Index, vramMB: g.VRAMMB, reserved: p.ReservedGPU(n.Name, g.Index, indices) ||
			p.GPUPreservation.Enabled && slices.Contains(n.InferenceGPUs, g.Index)})
		s.vramMax = max(s.vramMax, g.VRAMMB)
	}
	s.tier = p.TierOf(n.Capacity.TotalVRAMMB())
	if !empty {
		for _, a := range n.Allocations {
			s.add(a)
		}
	}
	return s
}

func (s *nodeState) gpu(index int) *gpuState {
	for i := range s.gpus {
		if s.gpus[i].index == index {
			return &s.gpus[i]
		}
	}
	return nil
}

func (s *nodeState) add(a Allocation) {
	s.usedCPU += a.CPUs
	s.usedMem += a.MemoryMB
	for _, g := range a.GPUs {
		if d := s.gpu(g.Index); d != nil {
			d.used += g.Share
		}
	}
	s.allocs = append(s.allocs, a)
}

// usable says whether device i can take a member with the VRAM floor.
func (s *nodeState) usable(i, minVRAM int) bool {
	return !s.gpus[i].reserved && s.gpus[i].vramMB >= minVRAM
}

// removeLast takes the latest allocation off (see cluster.release).
func (s *nodeState) removeLast() {
	a := s.allocs[len(s.allocs)-1]
	s.allocs = s.allocs[:len(s.allocs)-1]
	s.usedCPU -= a.CPUs
	s.usedMem -= a.MemoryMB
	for _, g := range a.GPUs {
		if d := s.gpu(g.Index); d != nil {
			d.used -= g.Share
		}
	}
}

func (s *nodeState) cpuLimit() float64 { return s.node.Capacity.CPUs * s.capShare }
func (s *nodeState) memLimit() float64 { return float64(s.node.Capacity.MemoryMB) * s.capShare }

// utilisation after adding cpu/mem/gpu, the bin-packing measure.
func (s *nodeState) utilisation(cpu float64, mem int64, gpu float64) float64 {
	parts, n := 0.0, 0.0
	if c := s.node.Capacity.CPUs; c > 0 {
		parts += (s.usedCPU + cpu) / c
		n++
	}
	if m := s.node.Capacity.MemoryMB; m > 0 {
		parts += float64(s.usedMem+mem) / float64(m)
		n++
	}
	if gpu > 0 && len(s.gpus) > 0 {
		used := 0.0
		for _, g := range s.gpus {
			used += g.used
		}
		parts += (used + gpu) / float64(len(s.gpus))
		n++
	}
	if n == 0 {
		return 0
	}
	return parts / n
}
