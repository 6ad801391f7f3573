package scheduler

import (
	"fmt"
	"slices"

	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/workspec"
)

// Rejection is why one node cannot take a unit. Permanent means the node
// could not take it even with nothing running there.
type Rejection struct {
	Constraint string `json:"constraint"`
	Reason     string `json:"reason"`
	Permanent  bool   `json:"permanent"`
}

// placeCtx is what the filters and scorers know about the work being
// placed: its spec and which nodes its groups already use.
type placeCtx struct {
	work   *Work
	params params.Params
	// groupNodes counts members of each group of this work per node.
	groupNodes map[string]map[string]int
	// gpuPick is the device assignment the GPU filter found, per node, for
	// the unit under evaluation; select uses the winner's.
	gpuPick map[string][][]GPUShare
}

// filter is one feasibility stage.
type filter interface {
	name() string
	check(c *placeCtx, n *nodeState, u *unit) *Rejection
}

func reject(constraint string, permanent bool, format string, args ...any) *Rejection {
	return &Rejection{Constraint: constraint, Reason: fmt.Sprintf(format, args...), Permanent: permanent}
}

// healthFilter: only ready nodes take new work.
type healthFilter struct{}

func (healthFilter) name() string { return "health" }
func (healthFilter) check(_ *placeCtx, n *nodeState, _ *unit) *Rejection {
	if !n.ready {
		return reject("health", false, "node is %s", n.node.Health)
	}
	return nil
}

// nodeAffinityFilter: label requirements and exclusions on the node.
type nodeAffinityFilter struct{}

func (nodeAffinityFilter) name() string { return "node_affinity" }
func (nodeAffinityFilter) check(_ *placeCtx, n *nodeState, u *unit) *Rejection {
	for _, m := range u.members {
		for _, sel := range m.role.NodeAffinity {
			if !sel.Matches(n.node.Labels) {
				return reject("node_affinity", true, "%s needs label %s", m.role.Name, describe(sel))
			}
		}
		for _, sel := range m.role.NodeAntiAffinity {
			if sel.Matches(n.node.Labels) {
				return reject("node_anti_affinity", true, "%s avoids label %s", m.role.Name, describe(sel))
			}
		}
	}
	return nil
}

func describe(s workspec.Selector) string {
	if len(s.Values) == 0 {
		return s.Key
	}
	return fmt.Sprintf("%s in %v", s.Key, s.Values)
}

// antiAffinityFilter: keeps a member off nodes running allocations whose
// labels match its anti-affinity (including members placed moments ago).
type antiAffinityFilter struct{}

func (antiAffinityFilter) name() string { return "anti_affinity" }
func (antiAffinityFilter) check(_ *placeCtx, n *nodeState, u *unit) *Rejection {
	for _, m := range u.members {
		for _, sel := range m.role.AntiAffinity {
			for _, a := range n.allocs {
				if sel.Matches(a.Labels) {
					return reject("anti_affinity", false, "%s avoids %s, and %s/%s#%d runs here", m.role.Name, describe(sel), a.WorkID, a.Role, a.Instance)
				}
			}
			// A STRICT_PACK unit holding two members that repel each other
			// can never be placed anywhere.
			for _, o := range u.members {
				if o != m && sel.Matches(o.labels) {
					return reject("anti_affinity", true, "%s avoids %s, which is packed with it", m.role.Name, o.name())
				}
			}
		}
	}
	return nil
}

// providerFilter: providers the spec or the work kind's policy avoid, and
// ephemeral nodes for training.
type providerFilter struct{}

func (providerFilter) name() string { return "provider" }
func (providerFilter) check(c *placeCtx, n *nodeState, _ *unit) *Rejection {
	s := &c.work.Spec
	prov := n.node.Provider
	if slices.Contains(s.Providers.Avoid, prov) {
		return reject("provider", true, "work avoids provider %s", prov)
	}
	if slices.Contains(c.params.Preference(s.Kind).Avoid, prov) {
		return reject("provider", true, "%s work avoids provider %s", s.Kind, prov)
	}
	if s.Kind == workspec.KindTraining && (n.node.Ephemeral || c.params.EphemeralProvider(prov)) {
		return reject("provider", true, "training avoids ephemeral node (provider %s)", prov)
	}
	return nil
}

// strategyFilter: STRICT_SPREAD puts each member of a group on its own node.
// (STRICT_PACK is a single unit, so it needs no filter.)
type strategyFilter struct{}

func (strategyFilter) name() string { return "strategy" }
func (strategyFilter) check(c *placeCtx, n *nodeState, u *unit) *Rejection {
	if u.strat != workspec.StrictSpread {
		return nil
	}
	if c.groupNodes[u.group][n.node.Name] > 0 {
		return reject("strategy", false, "STRICT_SPREAD group %s already has a member here", u.group)
	}
	return nil
}

// cpuFilter and memoryFilter keep every node within the capacity share.
type cpuFilter struct{}

func (cpuFilter) name() string { return "cpu" }
func (cpuFilter) check(_ *placeCtx, n *nodeState, u *unit) *Rejection {
	limit := n.cpuLimit()
	if u.cpus > limit {
		return reject("cpu", true, "needs %g CPUs; %g%% of %g is %g", u.cpus, n.capShare*100, n.node.Capacity.CPUs, limit)
	}
	if n.usedCPU+u.cpus > limit+1e-9 {
		return reject("cpu", false, "needs %g CPUs; %g of %g usable are free", u.cpus, max(limit-n.usedCPU, 0), limit)
	}
	return nil
}

type memoryFilter struct{}

func (memoryFilter) name() string { return "memory" }
func (memoryFilter) check(_ *placeCtx, n *nodeState, u *unit) *Rejection {
	limit := n.memLimit()
	if float64(u.mem) > limit {
		return reject("memory", true, "needs %d MB; %g%% of %d MB is %.0f MB", u.mem, n.capShare*100, n.node.Capacity.MemoryMB, limit)
	}
	if float64(n.usedMem+u.mem) > limit {
		return reject("memory", false, "needs %d MB; %.0f MB of %.0f MB usable are free", u.mem, max(limit-float64(n.usedMem), 0), limit)
	}
	return nil
}

// gpuFilter finds devices for every member: a fraction shares one device,
// whole GPUs take free devices. Reserved devices and devices below the
// member's VRAM floor never count.
type gpuFilter struct{}

func (gpuFilter) name() string { return "gpu" }
func (gpuFilter) check(c *placeCtx, n *nodeState, u *unit) *Rejection {
	if u.gpus == 0 {
		return nil
	}
	if pick, ok := assignGPUs(n, u, false); ok {
		c.gpuPick[n.node.Name] = pick
		return nil
	}
	// Could it fit on the empty node? Decides waiting vs never.
	_, fitsEmpty := assignGPUs(n, u, true)
	eligible, reserved, small := 0, 0, 0
	for _, g := range n.gpus {
		switch {
		case g.reserved:
			reserved++
		case g.vramMB < maxVRAMFloor(u):
			small++
		default:
			eligible++
		}
	}
	detail := fmt.Sprintf("needs %g GPUs (>= %d MB VRAM); node has %d eligible, %d reserved for inference, %d too small", u.gpus, maxVRAMFloor(u), eligible, reserved, small)
	if !fitsEmpty {
		return reject("gpu", true, "%s", detail)
	}
	return reject("gpu", false, "%s; eligible GPUs are busy", detail)
}

func maxVRAMFloor(u *unit) int {
	f := 0
	for _, m := range u.members {
		if m.role.GPUs > 0 {
			f = max(f, m.minVRAM)
		}
	}
	return f
}

// assignGPUs picks devices for each member; empty ignores current use.
// Fractions go to the busiest device they fit on (packing shares).
func assignGPUs(n *nodeState, u *unit, empty bool) ([][]GPUShare, bool) {
	used := make([]float64, len(n.gpus))
	if !empty {
		for i, g := range n.gpus {
			used[i] = g.used
		}
	}
	picks := make([][]GPUShare, len(u.members))
	for mi, m := range u.members {
		want := m.role.GPUs
		if want == 0 {
			continue
		}
		usable := func(i int) bool { return !n.gpus[i].reserved && n.gpus[i].vramMB >= m.minVRAM }
		if want < 1 {
			best := -1
			for i := range n.gpus {
				if usable(i) && used[i]+want <= 1+1e-9 && (best < 0 || used[i] > used[best]) {
					best = i
				}
			}
			if best < 0 {
				return nil, false
			}
			used[best] += want
			picks[mi] = []GPUShare{{Index: n.gpus[best].index, Share: want}}
			continue
		}
		need := int(want)
		for i := range n.gpus {
			if need > 0 && usable(i) && used[i] < 1e-9 {
				used[i] = 1
				picks[mi] = append(picks[mi], GPUShare{Index: n.gpus[i].index, Share: 1})
				need--
			}
		}
		if need > 0 {
			return nil, false
		}
	}
	return picks, true
}
