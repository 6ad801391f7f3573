package policy

import (
	"sort"

	"github.com/open-policy-agent/opa/v1/ast"
)

// value builds the input's AST directly, mirroring its JSON encoding
// (omitempty fields left out). Going through JSON text and OPA's decoder
// cost more than the policy evaluation itself.
// cluster is the prebuilt term of in.Cluster (see clusterValue).
func (in *Input) value(cluster *ast.Term) ast.Value {
	o := ast.NewObject(
		ast.Item(ast.StringTerm("work"), ast.NewTerm(in.Work.value())),
		ast.Item(ast.StringTerm("cluster"), cluster),
		ast.Item(ast.StringTerm("usage"), ast.NewTerm(in.Usage.value())),
	)
	if len(in.Placement) > 0 {
		ts := make([]*ast.Term, len(in.Placement))
		for i, p := range in.Placement {
			po := ast.NewObject(
				ast.Item(ast.StringTerm("node"), ast.StringTerm(p.Node)),
				ast.Item(ast.StringTerm("role"), ast.StringTerm(p.Role)),
				ast.Item(ast.StringTerm("cpus"), ast.FloatNumberTerm(p.CPUs)),
				ast.Item(ast.StringTerm("memory_mb"), ast.IntNumberTerm(int(p.MemoryMB))),
			)
			if p.Count != 0 {
				po.Insert(ast.StringTerm("count"), ast.IntNumberTerm(p.Count))
			}
			if len(p.GPUs) > 0 {
				gs := make([]*ast.Term, len(p.GPUs))
				for j, g := range p.GPUs {
					gs[j] = ast.ObjectTerm(
						ast.Item(ast.StringTerm("index"), ast.IntNumberTerm(g.Index)),
						ast.Item(ast.StringTerm("share"), ast.FloatNumberTerm(g.Share)),
					)
				}
				po.Insert(ast.StringTerm("gpus"), ast.ArrayTerm(gs...))
			}
			ts[i] = ast.NewTerm(po)
		}
		o.Insert(ast.StringTerm("placement"), ast.ArrayTerm(ts...))
	}
	return o
}

func (w *Work) value() ast.Object {
	o := ast.NewObject(
		ast.Item(ast.StringTerm("id"), ast.StringTerm(w.ID)),
		ast.Item(ast.StringTerm("kind"), ast.StringTerm(w.Kind)),
		ast.Item(ast.StringTerm("priority"), ast.IntNumberTerm(w.Priority)),
		ast.Item(ast.StringTerm("waiting_seconds"), ast.IntNumberTerm(int(w.WaitingSeconds))),
	)
	if w.Config != "" {
		o.Insert(ast.StringTerm("config"), ast.StringTerm(w.Config))
	}
	if w.Board != "" {
		o.Insert(ast.StringTerm("board"), ast.StringTerm(w.Board))
	}
	roles := make([]*ast.Term, len(w.Roles))
	for i, r := range w.Roles {
		ro := ast.NewObject(
			ast.Item(ast.StringTerm("name"), ast.StringTerm(r.Name)),
			ast.Item(ast.StringTerm("count"), ast.IntNumberTerm(r.Count)),
			ast.Item(ast.StringTerm("cpus"), ast.FloatNumberTerm(r.CPUs)),
			ast.Item(ast.StringTerm("gpus"), ast.FloatNumberTerm(r.GPUs)),
			ast.Item(ast.StringTerm("memory_mb"), ast.IntNumberTerm(int(r.MemoryMB))),
		)
		if r.MinVRAMMB != 0 {
			ro.Insert(ast.StringTerm("min_vram_mb"), ast.IntNumberTerm(r.MinVRAMMB))
		}
		roles[i] = ast.NewTerm(ro)
	}
	o.Insert(ast.StringTerm("roles"), arrayOrNull(roles, w.Roles == nil))
	if w.Providers != nil {
		po := ast.NewObject()
		if len(w.Providers.Prefer) > 0 {
			po.Insert(ast.StringTerm("prefer"), stringsTerm(w.Providers.Prefer))
		}
		if len(w.Providers.Avoid) > 0 {
			po.Insert(ast.StringTerm("avoid"), stringsTerm(w.Providers.Avoid))
		}
		o.Insert(ast.StringTerm("providers"), ast.NewTerm(po))
	}
	return o
}

func clusterValue(c Cluster) *ast.Term {
	return ast.ObjectTerm(ast.Item(ast.StringTerm("nodes"), nodesTerm(c.Nodes)))
}

func nodesTerm(nodes []Node) *ast.Term {
	ts := make([]*ast.Term, len(nodes))
	for i, n := range nodes {
		no := ast.NewObject(
			ast.Item(ast.StringTerm("name"), ast.StringTerm(n.Name)),
			ast.Item(ast.StringTerm("cpus"), ast.FloatNumberTerm(n.CPUs)),
			ast.Item(ast.StringTerm("memory_mb"), ast.IntNumberTerm(int(n.MemoryMB))),
			ast.Item(ast.StringTerm("used"), ast.ObjectTerm(
				ast.Item(ast.StringTerm("cpus"), ast.FloatNumberTerm(n.Used.CPUs)),
				ast.Item(ast.StringTerm("memory_mb"), ast.IntNumberTerm(int(n.Used.MemoryMB))),
			)),
		)
		if n.Provider != "" {
			no.Insert(ast.StringTerm("provider"), ast.StringTerm(n.Provider))
		}
		if n.Ephemeral {
			no.Insert(ast.StringTerm("ephemeral"), ast.BooleanTerm(true))
		}
		if len(n.GPUs) > 0 {
			gs := make([]*ast.Term, len(n.GPUs))
			for j, g := range n.GPUs {
				gs[j] = ast.ObjectTerm(
					ast.Item(ast.StringTerm("index"), ast.IntNumberTerm(g.Index)),
					ast.Item(ast.StringTerm("vram_mb"), ast.IntNumberTerm(g.VRAMMB)),
				)
			}
			no.Insert(ast.StringTerm("gpus"), ast.ArrayTerm(gs...))
		}
		ts[i] = ast.NewTerm(no)
	}
	return arrayOrNull(ts, nodes == nil)
}

func (u *Usage) value() ast.Object {
	o := ast.NewObject(ast.Item(ast.StringTerm("tier1_capacity_seconds"), ast.FloatNumberTerm(u.Tier1CapacitySeconds)))
	if len(u.Tier1GPUSecondsByConfig) > 0 {
		m := ast.NewObject()
		for _, k := range sortedKeys(u.Tier1GPUSecondsByConfig) {
			m.Insert(ast.StringTerm(k), ast.FloatNumberTerm(u.Tier1GPUSecondsByConfig[k]))
		}
		o.Insert(ast.StringTerm("tier1_gpu_seconds_by_config"), ast.NewTerm(m))
	}
	if len(u.RunningTrainingByConfig) > 0 {
		m := ast.NewObject()
		for _, k := range sortedKeys(u.RunningTrainingByConfig) {
			m.Insert(ast.StringTerm(k), ast.IntNumberTerm(u.RunningTrainingByConfig[k]))
		}
		o.Insert(ast.StringTerm("running_training_by_config"), ast.NewTerm(m))
	}
	return o
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func stringsTerm(xs []string) *ast.Term {
	ts := make([]*ast.Term, len(xs))
	for i, x := range xs {
		ts[i] = ast.StringTerm(x)
	}
	return ast.ArrayTerm(ts...)
}

// arrayOrNull matches encoding/json: a nil slice encodes as null.
func arrayOrNull(ts []*ast.Term, isNil bool) *ast.Term {
	if isNil {
		return ast.NullTerm()
	}
	return ast.ArrayTerm(ts...)
}
