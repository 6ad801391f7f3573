package scheduler

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/workspec"
)

// Work is an admitted spec waiting for, or holding, a placement.
type Work struct {
	ID   string
	Spec workspec.Spec
}

// member is one role instance to place.
type member struct {
	work     *Work
	role     *workspec.Role
	instance int
	group    string
	strategy workspec.Strategy // "" for roles without a group
	minVRAM  int
	// labels, and the role's node (anti-)affinity rejections, are written
	// on first need.
	labels         map[string]string
	affinity, anti []*Rejection
}

func (m *member) name() string { return m.role.Name + "#" + strconv.Itoa(m.instance) }

// labelMap is what other roles' anti-affinity matches: work, role, kind,
// config and the role's own labels.
func (m *member) labelMap() map[string]string {
	if m.labels == nil {
		s := &m.work.Spec
		m.labels = make(map[string]string, 4+len(m.role.Labels))
		m.labels["work"], m.labels["role"], m.labels["kind"], m.labels["config"] = m.work.ID, m.role.Name, s.Kind, s.Config
		for k, v := range m.role.Labels {
			m.labels[k] = v
		}
	}
	return m.labels
}

// affinityRejection is why a node without the role's i-th node affinity
// label cannot take the member.
func (m *member) affinityRejection(i int) *Rejection {
	if m.affinity == nil {
		m.affinity = make([]*Rejection, len(m.role.NodeAffinity))
	}
	if m.affinity[i] == nil {
		m.affinity[i] = &Rejection{Constraint: "node_affinity", Permanent: true,
			Reason: fmt.Sprintf("%s needs label %s", m.role.Name, describe(m.role.NodeAffinity[i]))}
	}
	return m.affinity[i]
}

// antiAffinityRejection is why a node with the role's i-th node
// anti-affinity label cannot take the member.
func (m *member) antiAffinityRejection(i int) *Rejection {
	if m.anti == nil {
		m.anti = make([]*Rejection, len(m.role.NodeAntiAffinity))
	}
	if m.anti[i] == nil {
		m.anti[i] = &Rejection{Constraint: "node_anti_affinity", Permanent: true,
			Reason: fmt.Sprintf("%s avoids label %s", m.role.Name, describe(m.role.NodeAntiAffinity[i]))}
	}
	return m.anti[i]
}

// unit is what one pipeline pass places on one node: a single member, or a
// whole STRICT_PACK group.
type unit struct {
	members []*member
	cpus    float64
	mem     int64
	gpus    float64
	group   string
	strat   workspec.Strategy
	// nodeAffinity and antiAffinity: some member has node (anti-)affinity
	// selectors, or anti-affinity; without, those filters pass every node.
	nodeAffinity, antiAffinity bool
}

func (u *unit) name() string {
	if len(u.members) == 1 {
		return u.members[0].name()
	}
	return "group " + u.group
}

// units expands a work into placement units, hardest first so scarce
// resources are claimed before the easy members take the good nodes. The
// units point into w, which must outlive them.
func units(w *Work, p params.Params) []*unit {
	s := &w.Spec
	minBoard, boardKnown := p.MinVRAMMB(s.BoardName())
	var out []*unit
	packs := map[string]*unit{}
	for ri := range s.Roles {
		r := &s.Roles[ri]
		strat := workspec.Strategy("")
		if r.Group != "" {
			strat = s.GroupStrategy(r.Group)
		}
		for i := 0; i < max(r.Count, 1); i++ {
			m := &member{work: w, role: r, instance: i, group: r.Group, strategy: strat, minVRAM: r.MinVRAMMB}
			if r.GPUs > 0 && boardKnown {
				m.minVRAM = max(m.minVRAM, minBoard)
			}
			if strat == workspec.StrictPack {
				u := packs[r.Group]
				if u == nil {
					u = &unit{group: r.Group, strat: strat}
					packs[r.Group] = u
					out = append(out, u)
				}
				u.members = append(u.members, m)
				u.cpus += r.CPUs
				u.mem += r.MemoryMB
				u.gpus += r.GPUs
				continue
			}
			out = append(out, &unit{members: []*member{m}, cpus: r.CPUs, mem: r.MemoryMB, gpus: r.GPUs, group: r.Group, strat: strat})
		}
	}
	for _, u := range out {
		for _, m := range u.members {
			u.nodeAffinity = u.nodeAffinity || len(m.role.NodeAffinity) > 0 || len(m.role.NodeAntiAffinity) > 0
			u.antiAffinity = u.antiAffinity || len(m.role.AntiAffinity) > 0
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (len(a.members) > 1) != (len(b.members) > 1) {
			return len(a.members) > 1
		}
		if a.gpus != b.gpus {
			return a.gpus > b.gpus
		}
		return a.cpus > b.cpus
	})
	return out
}
