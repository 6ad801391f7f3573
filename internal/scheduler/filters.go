package scheduler

import (
	"fmt"
	"math"
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
// placed: its spec, what the params say about it, and which nodes its
// groups already use.
type placeCtx struct {
	work     *Work
	pref     params.Preference // the work kind's provider preference
	tiers    []int             // preferred GPU tiers, best first
	training bool
	cl       *cluster
	// provs is what the spec and the kind's preference say of each of the
	// cluster's providers (nodeState.prov).
	provs []provView
	// groupNodes counts members of each group of this work per node name
	// (indexed by nodeState.nid); here is the unit's group's, or nil.
	groupNodes map[string][]int32
	here       []int32
}

// provView is one provider as the work sees it: avoided (by the spec or by
// the kind's policy), and its score.
type provView struct {
	avoid rejKind // rejProviderSpec, rejProviderKind or accepted
	score float64
}

func newPlaceCtx(w *Work, p *params.Params, c *cluster) *placeCtx {
	s := &w.Spec
	ctx := &placeCtx{work: w, pref: p.Preference(s.Kind), tiers: s.Tiers, cl: c,
		training: workspec.Trains(s.Kind), provs: make([]provView, len(c.provs))}
	if len(ctx.tiers) == 0 {
		ctx.tiers = p.TierPreference(s.Kind)
	}
	for i, prov := range c.provs {
		v := &ctx.provs[i]
		switch {
		case slices.Contains(s.Providers.Avoid, prov):
			v.avoid = rejProviderSpec
		case slices.Contains(ctx.pref.Avoid, prov):
			v.avoid = rejProviderKind
		}
		v.score = providerScore(ctx, prov, p.Cost(prov))
	}
	return ctx
}

func (c *placeCtx) addGroup(group, node string) {
	if group == "" {
		return
	}
	id, ok := c.cl.nid[node]
	if !ok {
		return // not in this cluster: no node here is counted
	}
	if c.groupNodes == nil {
		c.groupNodes = map[string][]int32{}
	}
	counts := c.groupNodes[group]
	if counts == nil {
		counts = make([]int32, c.cl.names)
		c.groupNodes[group] = counts
	}
	counts[id]++
}

// groupHere says whether the unit's group already has a member on n.
func (c *placeCtx) groupHere(n *nodeState) bool {
	return c.here != nil && c.here[n.nid] > 0
}

// filter is one feasibility stage. check says why n cannot take u, as a
// rej the trace writes out (with explain) only when it is wanted; checkAll
// runs check on every node no earlier stage rejected (rejs[i] is node
// i's verdict), one stage across the nodes at a time.
type filter interface {
	name() string
	checkAll(c *placeCtx, nodes []*nodeState, u *unit, rejs []rej)
}

// rejKind is which filter rejected a node, and how.
type rejKind uint8

const (
	accepted rejKind = iota
	rejHealth
	rejNodeAffinity     // a: member, b: selector
	rejNodeAntiAffinity // a: member, b: selector
	rejAntiAffinity     // a: member, b: selector, c: allocation on the node
	rejAntiAffinityPack // a: member, c: the other member
	rejProviderSpec
	rejProviderKind
	rejProviderEphemeral
	rejStrategy
	rejCPU
	rejMemory
	rejGPU
)

// rej is a rejection before its reason is written: which check failed and
// which of the unit's members, selectors or the node's allocations it
// names. The numbers a reason quotes are read when it is written, before
// anything changes (evaluate writes its trace right after the checks).
type rej struct {
	kind    rejKind
	perm    bool
	a, b, c int32
}

// constraints names each kind's constraint.
var constraints = [...]string{
	rejHealth:            "health",
	rejNodeAffinity:      "node_affinity",
	rejNodeAntiAffinity:  "node_anti_affinity",
	rejAntiAffinity:      "anti_affinity",
	rejAntiAffinityPack:  "anti_affinity",
	rejProviderSpec:      "provider",
	rejProviderKind:      "provider",
	rejProviderEphemeral: "provider",
	rejStrategy:          "strategy",
	rejCPU:               "cpu",
	rejMemory:            "memory",
	rejGPU:               "gpu",
}

// reasonKey identifies a reason's words: its kind and the values it quotes
// (floats by their bits, so -0 and NaN are keys like any other; strings
// by their number in cluster.strs, providers in cluster.provs).
type reasonKey struct {
	kind rejKind
	perm bool
	x    [4]uint64
}

// memoEntry is a rejection a node gave lately, with its key.
type memoEntry struct {
	key reasonKey
	rej *Rejection
}

func bits(f float64) uint64 { return math.Float64bits(f) }

// rejection writes r out for node n and unit u. Reasons that quote only
// the node's and the unit's shape and use are written once per cluster
// and the Rejection shared by every verdict that says the same; so are a
// member's node affinity rejections. The rest name allocations or other
// members and are written each time.
func (c *cluster) rejection(ctx *placeCtx, n *nodeState, u *unit, r rej) *Rejection {
	switch r.kind {
	case rejNodeAffinity:
		return u.members[r.a].affinityRejection(int(r.b))
	case rejNodeAntiAffinity:
		return u.members[r.a].antiAffinityRejection(int(r.b))
	}
	k, shared := reasonKeyOf(ctx, n, u, r)
	if !shared {
		return &Rejection{Constraint: constraints[r.kind], Reason: writeReason(ctx, n, u, r), Permanent: r.perm}
	}
	// A node mostly says what it said for one of the last few units
	// (nothing placed on it since, units of a few shapes); else a node of
	// the same shape may have.
	for i := range n.memo {
		if e := &n.memo[i]; e.rej != nil && e.key == k {
			return e.rej
		}
	}
	out, ok := c.reasons[k]
	if !ok {
		out = &Rejection{Constraint: constraints[r.kind], Reason: writeReason(ctx, n, u, r), Permanent: r.perm}
		if c.reasons == nil {
			c.reasons = map[reasonKey]*Rejection{}
		}
		c.reasons[k] = out
	}
	n.memo[n.memoNext] = memoEntry{k, out}
	n.memoNext = (n.memoNext + 1) % len(n.memo)
	return out
}

// reasonKeyOf is the key of r's reason, if it is one to share.
func reasonKeyOf(ctx *placeCtx, n *nodeState, u *unit, r rej) (reasonKey, bool) {
	k := reasonKey{kind: r.kind, perm: r.perm}
	switch r.kind {
	case rejHealth:
		k.x[0] = uint64(n.health)
	case rejProviderSpec, rejProviderEphemeral:
		k.x[0] = uint64(n.prov)
	case rejProviderKind:
		k.x[0], k.x[1] = uint64(ctx.cl.intern(ctx.work.Spec.Kind)), uint64(n.prov)
	case rejStrategy:
		k.x[0] = uint64(ctx.cl.intern(u.group))
	case rejCPU:
		limit := n.cpuLimit()
		if r.perm {
			k.x = [4]uint64{bits(u.cpus), bits(n.capShare), bits(n.node.Capacity.CPUs), bits(limit)}
		} else {
			k.x = [4]uint64{bits(u.cpus), bits(n.usedCPU), bits(limit)}
		}
	case rejMemory:
		limit := n.memLimit()
		if r.perm {
			k.x = [4]uint64{uint64(u.mem), bits(n.capShare), uint64(n.node.Capacity.MemoryMB), bits(limit)}
		} else {
			k.x = [4]uint64{uint64(u.mem), uint64(n.usedMem), bits(limit)}
		}
	case rejGPU:
		floor := maxVRAMFloor(u)
		eligible, reserved, small := gpuCounts(n, floor)
		k.x = [4]uint64{bits(u.gpus), uint64(floor), uint64(eligible)<<32 | uint64(reserved), uint64(small)}
	default:
		return k, false
	}
	return k, true
}

// writeReason words r.
func writeReason(ctx *placeCtx, n *nodeState, u *unit, r rej) string {
	switch r.kind {
	case rejHealth:
		return fmt.Sprintf("node is %s", n.node.Health)
	case rejAntiAffinity:
		m, a := u.members[r.a], &n.allocs[r.c]
		return fmt.Sprintf("%s avoids %s, and %s/%s#%d runs here", m.role.Name, describe(m.role.AntiAffinity[r.b]), a.WorkID, a.Role, a.Instance)
	case rejAntiAffinityPack:
		m, o := u.members[r.a], u.members[r.c]
		return fmt.Sprintf("%s avoids %s, which is packed with it", m.role.Name, o.name())
	case rejProviderSpec:
		return fmt.Sprintf("work avoids provider %s", n.node.Provider)
	case rejProviderKind:
		return fmt.Sprintf("%s work avoids provider %s", ctx.work.Spec.Kind, n.node.Provider)
	case rejProviderEphemeral:
		return fmt.Sprintf("training avoids ephemeral node (provider %s)", n.node.Provider)
	case rejStrategy:
		return fmt.Sprintf("STRICT_SPREAD group %s already has a member here", u.group)
	case rejCPU:
		limit := n.cpuLimit()
		if r.perm {
			return fmt.Sprintf("needs %g CPUs; %g%% of %g is %g", u.cpus, milli(n.capShare*100), n.node.Capacity.CPUs, milli(limit))
		}
		return fmt.Sprintf("needs %g CPUs; %g of %g usable are free", u.cpus, milli(max(limit-n.usedCPU, 0)), milli(limit))
	case rejMemory:
		limit := n.memLimit()
		if r.perm {
			return fmt.Sprintf("needs %d MB; %g%% of %d MB is %.0f MB", u.mem, n.capShare*100, n.node.Capacity.MemoryMB, limit)
		}
		return fmt.Sprintf("needs %d MB; %.0f MB of %.0f MB usable are free", u.mem, max(limit-float64(n.usedMem), 0), limit)
	case rejGPU:
		floor := maxVRAMFloor(u)
		eligible, reserved, small := gpuCounts(n, floor)
		detail := fmt.Sprintf("needs %g GPUs (>= %d MB VRAM); node has %d eligible, %d reserved for inference, %d too small", u.gpus, floor, eligible, reserved, small)
		if r.perm {
			return detail
		}
		return detail + "; eligible GPUs are busy"
	}
	panic(fmt.Sprintf("scheduler: rejection of unknown kind %d", r.kind))
}

// gpuCounts sorts n's devices for a unit's VRAM floor.
func gpuCounts(n *nodeState, floor int) (eligible, reserved, small int) {
	for _, g := range n.gpus {
		switch {
		case g.reserved:
			reserved++
		case g.vramMB < floor:
			small++
		default:
			eligible++
		}
	}
	return eligible, reserved, small
}

// healthFilter: only ready nodes take new work.
type healthFilter struct{}

func (healthFilter) name() string { return "health" }
func (f healthFilter) checkAll(c *placeCtx, nodes []*nodeState, u *unit, rejs []rej) {
	for i, n := range nodes {
		if rejs[i].kind == accepted {
			rejs[i] = f.check(c, n, u)
		}
	}
}
func (healthFilter) check(_ *placeCtx, n *nodeState, _ *unit) rej {
	if !n.ready {
		return rej{kind: rejHealth}
	}
	return rej{}
}

// nodeAffinityFilter: label requirements and exclusions on the node.
type nodeAffinityFilter struct{}

func (nodeAffinityFilter) name() string { return "node_affinity" }
func (f nodeAffinityFilter) checkAll(c *placeCtx, nodes []*nodeState, u *unit, rejs []rej) {
	if !u.nodeAffinity {
		return
	}
	for i, n := range nodes {
		if rejs[i].kind == accepted {
			rejs[i] = f.check(c, n, u)
		}
	}
}
func (nodeAffinityFilter) check(_ *placeCtx, n *nodeState, u *unit) rej {
	for mi, m := range u.members {
		for si, sel := range m.role.NodeAffinity {
			if !sel.Matches(n.node.Labels) {
				return rej{kind: rejNodeAffinity, perm: true, a: int32(mi), b: int32(si)}
			}
		}
		for si, sel := range m.role.NodeAntiAffinity {
			if sel.Matches(n.node.Labels) {
				return rej{kind: rejNodeAntiAffinity, perm: true, a: int32(mi), b: int32(si)}
			}
		}
	}
	return rej{}
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
func (f antiAffinityFilter) checkAll(c *placeCtx, nodes []*nodeState, u *unit, rejs []rej) {
	if !u.antiAffinity {
		return
	}
	for i, n := range nodes {
		if rejs[i].kind == accepted {
			rejs[i] = f.check(c, n, u)
		}
	}
}
func (antiAffinityFilter) check(_ *placeCtx, n *nodeState, u *unit) rej {
	for mi, m := range u.members {
		for si, sel := range m.role.AntiAffinity {
			for ai := range n.allocs {
				if sel.Matches(n.allocs[ai].Labels) {
					return rej{kind: rejAntiAffinity, a: int32(mi), b: int32(si), c: int32(ai)}
				}
			}
			// A STRICT_PACK unit holding two members that repel each other
			// can never be placed anywhere.
			for oi, o := range u.members {
				if o != m && sel.Matches(o.labelMap()) {
					return rej{kind: rejAntiAffinityPack, perm: true, a: int32(mi), b: int32(si), c: int32(oi)}
				}
			}
		}
	}
	return rej{}
}

// providerFilter: providers the spec or the work kind's policy avoid, and
// ephemeral nodes for training.
type providerFilter struct{}

func (providerFilter) name() string { return "provider" }
func (f providerFilter) checkAll(c *placeCtx, nodes []*nodeState, u *unit, rejs []rej) {
	for i, n := range nodes {
		if rejs[i].kind == accepted {
			rejs[i] = f.check(c, n, u)
		}
	}
}
func (providerFilter) check(c *placeCtx, n *nodeState, _ *unit) rej {
	if k := c.provs[n.prov].avoid; k != accepted {
		return rej{kind: k, perm: true}
	}
	if c.training && n.ephemeral {
		return rej{kind: rejProviderEphemeral, perm: true}
	}
	return rej{}
}

// strategyFilter: STRICT_SPREAD puts each member of a group on its own node.
// (STRICT_PACK is a single unit, so it needs no filter.)
type strategyFilter struct{}

func (strategyFilter) name() string { return "strategy" }
func (f strategyFilter) checkAll(c *placeCtx, nodes []*nodeState, u *unit, rejs []rej) {
	if u.strat != workspec.StrictSpread {
		return
	}
	for i, n := range nodes {
		if rejs[i].kind == accepted {
			rejs[i] = f.check(c, n, u)
		}
	}
}
func (strategyFilter) check(c *placeCtx, n *nodeState, u *unit) rej {
	if u.strat != workspec.StrictSpread {
		return rej{}
	}
	if c.groupHere(n) {
		return rej{kind: rejStrategy}
	}
	return rej{}
}

// cpuFilter and memoryFilter keep every node within the capacity share.
type cpuFilter struct{}

func (cpuFilter) name() string { return "cpu" }
func (f cpuFilter) checkAll(c *placeCtx, nodes []*nodeState, u *unit, rejs []rej) {
	for i, n := range nodes {
		if rejs[i].kind == accepted {
			rejs[i] = f.check(c, n, u)
		}
	}
}
func (cpuFilter) check(_ *placeCtx, n *nodeState, u *unit) rej {
	limit := n.cpuLimit()
	if u.cpus > limit {
		return rej{kind: rejCPU, perm: true}
	}
	if n.usedCPU+u.cpus > limit+1e-9 {
		return rej{kind: rejCPU}
	}
	return rej{}
}

type memoryFilter struct{}

func (memoryFilter) name() string { return "memory" }
func (f memoryFilter) checkAll(c *placeCtx, nodes []*nodeState, u *unit, rejs []rej) {
	for i, n := range nodes {
		if rejs[i].kind == accepted {
			rejs[i] = f.check(c, n, u)
		}
	}
}
func (memoryFilter) check(_ *placeCtx, n *nodeState, u *unit) rej {
	limit := n.memLimit()
	if float64(u.mem) > limit {
		return rej{kind: rejMemory, perm: true}
	}
	if float64(n.usedMem+u.mem) > limit {
		return rej{kind: rejMemory}
	}
	return rej{}
}

// gpuFilter finds devices for every member: a fraction shares one device,
// whole GPUs take free devices. Reserved devices and devices below the
// member's VRAM floor never count. (The devices themselves are picked
// again for the winner only.)
type gpuFilter struct{}

func (gpuFilter) name() string { return "gpu" }
func (f gpuFilter) checkAll(c *placeCtx, nodes []*nodeState, u *unit, rejs []rej) {
	if u.gpus == 0 {
		return
	}
	for i, n := range nodes {
		if rejs[i].kind == accepted {
			rejs[i] = f.check(c, n, u)
		}
	}
}
func (gpuFilter) check(c *placeCtx, n *nodeState, u *unit) rej {
	if u.gpus == 0 {
		return rej{}
	}
	used := c.cl.gpuScratch(len(n.gpus))
	if assignGPUs(n, u, false, used, nil) {
		return rej{}
	}
	// Could it fit on the empty node? Decides waiting vs never.
	return rej{kind: rejGPU, perm: !assignGPUs(n, u, true, used, nil)}
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

// assignGPUs says whether every member gets devices, and with picks (one
// entry per member) which; empty ignores current use. used is scratch of
// len(n.gpus). Fractions go to the busiest device they fit on (packing
// shares).
func assignGPUs(n *nodeState, u *unit, empty bool, used []float64, picks [][]GPUShare) bool {
	for i := range n.gpus {
		if empty {
			used[i] = 0
		} else {
			used[i] = n.gpus[i].used
		}
	}
	for mi, m := range u.members {
		want := m.role.GPUs
		if want == 0 {
			continue
		}
		if want < 1 {
			best := -1
			for i := range n.gpus {
				if n.usable(i, m.minVRAM) && used[i]+want <= 1+1e-9 && (best < 0 || used[i] > used[best]) {
					best = i
				}
			}
			if best < 0 {
				return false
			}
			used[best] += want
			if picks != nil {
				picks[mi] = []GPUShare{{Index: n.gpus[best].index, Share: want}}
			}
			continue
		}
		need := int(want)
		for i := range n.gpus {
			if need > 0 && n.usable(i, m.minVRAM) && used[i] < 1e-9 {
				used[i] = 1
				if picks != nil {
					picks[mi] = append(picks[mi], GPUShare{Index: n.gpus[i].index, Share: 1})
				}
				need--
			}
		}
		if need > 0 {
			return false
		}
	}
	return true
}

// milli rounds a CPU amount for people: sums of fractional requests leave
// float dust (0.19999999999999996 free).
func milli(x float64) float64 { return math.Round(x*1000) / 1000 }
