package scheduler

import (
	"fmt"
	"sort"

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
	role     *workspec.Role
	instance int
	group    string
	strategy workspec.Strategy // "" for roles without a group
	minVRAM  int
	labels   map[string]string
}

func (m *member) name() string { return fmt.Sprintf("%s#%d", m.role.Name, m.instance) }

// unit is what one pipeline pass places on one node: a single member, or a
// whole STRICT_PACK group.
type unit struct {
	members []*member
	cpus    float64
	mem     int64
	gpus    float64
	group   string
	strat   workspec.Strategy
}

func (u *unit) name() string {
	if len(u.members) == 1 {
		return u.members[0].name()
	}
	return "group " + u.group
}

// units expands a work into placement units, hardest first so scarce
// resources are claimed before the easy members take the good nodes.
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
			m := &member{role: r, instance: i, group: r.Group, strategy: strat, minVRAM: r.MinVRAMMB}
			if r.GPUs > 0 && boardKnown {
				m.minVRAM = max(m.minVRAM, minBoard)
			}
			m.labels = map[string]string{"work": w.ID, "role": r.Name, "kind": s.Kind, "config": s.Config}
			for k, v := range r.Labels {
				m.labels[k] = v
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
