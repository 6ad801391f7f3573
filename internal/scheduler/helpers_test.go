package scheduler

import (
	"encoding/json"
	"testing"

	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/resources"
	"github.com/trainyard/trainyard/internal/workspec"
)

func node(name, provider string, cpus float64, memGB int64, vramMB ...int) Node {
	n := Node{Name: name, Provider: provider, Capacity: resources.Capacity{CPUs: cpus, MemoryMB: memGB * 1000}}
	for i, v := range vramMB {
		n.Capacity.GPUs = append(n.Capacity.GPUs, resources.GPU{Index: i, Model: "gpu", VRAMMB: v})
	}
	return n
}

func work(id, kind string, roles ...workspec.Role) Work {
	return Work{ID: id, Spec: workspec.Spec{Name: id, Kind: kind, Config: "test", Roles: roles}}
}

func grouped(w Work, group string, strat workspec.Strategy) Work {
	w.Spec.Groups = append(w.Spec.Groups, workspec.Group{Name: group, Strategy: strat})
	return w
}

func role(name string, count int, cpus float64, memGB int64, gpus float64) workspec.Role {
	return workspec.Role{Name: name, Count: count, CPUs: cpus, MemoryMB: memGB * 1000, GPUs: gpus}
}

func inGroup(r workspec.Role, g string) workspec.Role { r.Group = g; return r }

// paramsWith returns the shipped params changed by f (JSON round trip keeps
// the derived indexes right).
func paramsWith(t testing.TB, mutate func(*params.Params)) params.Params {
	t.Helper()
	p := params.Default()
	if mutate != nil {
		mutate(&p)
	}
	p2, err := params.Parse(mustJSON(t, p))
	if err != nil {
		t.Fatal(err)
	}
	return p2
}

// nodesOf lists the node of each assignment in order.
func nodesOf(p Placement) []string {
	out := make([]string, len(p.Assignments))
	for i, a := range p.Assignments {
		out[i] = a.Node
	}
	return out
}

// apply records a placement's assignments on the nodes.
func apply(nodes []Node, p Placement) {
	for _, a := range p.Assignments {
		for i := range nodes {
			if nodes[i].Name == a.Node {
				nodes[i].Allocations = append(nodes[i].Allocations, a.Allocation)
			}
		}
	}
}

func distinct(xs []string) int {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return len(m)
}

func mustStatus(t *testing.T, p Placement, want Status) {
	t.Helper()
	if p.Status != want {
		t.Fatalf("%s: status %s, want %s (reason: %s)", p.WorkID, p.Status, want, p.Reason)
	}
	if want != Placed && len(p.Assignments) != 0 {
		t.Fatalf("%s: %s placement kept assignments %v", p.WorkID, p.Status, p.Assignments)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
