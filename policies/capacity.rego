# Node capacity (seed 000): no placement takes more than capacity_share
# (default 90%) of a node's CPUs or memory, counting what already runs there.
package trainyard.admission

import rego.v1

share := object.get(params, "capacity_share", 0.9)

# A role instance must fit within the share of at least one node, else it
# could never be placed. The summary's shapes are the node capacities no
# other node beats in both CPUs and memory: fitting one of them is fitting
# some node.
deny contains {
	"rule": "node_capacity",
	"reason": sprintf("role %s asks for %v CPUs and %v GB per instance; no node offers that within %v%% of its capacity", [role.name, role.cpus, gb(role.memory_mb), share * 100]),
} if {
	some i, role in input.work.roles
	not fitting_roles[i]
}

# Each shape's limits, computed once per decision: arithmetic on fractions
# is the costliest step of this check, comparisons are cheap.
usable_shapes := [[shape.cpus * share, shape.memory_mb * share] | some shape in input.cluster.summary.shapes]

# Indices of the roles that fit within some shape's limits (a set computed
# once, rather than a function called per role).
fitting_roles contains i if {
	some i, role in input.work.roles
	some limit in usable_shapes
	role.cpus <= limit[0]
	role.memory_mb <= limit[1]
}

placed_cpus[name] := sum([x | some p in input.placement; p.node == name; x := p.cpus * object.get(p, "count", 1)]) if {
	some p0 in input.placement
	name := p0.node
}

placed_mem[name] := sum([x | some p in input.placement; p.node == name; x := p.memory_mb * object.get(p, "count", 1)]) if {
	some p0 in input.placement
	name := p0.node
}

placement_deny contains {
	"rule": "node_capacity",
	"reason": sprintf("node %s would use %v of %v CPUs (limit %v%%)", [name, total, node.cpus, share * 100]),
} if {
	some name, cpus in placed_cpus
	node := nodes_by_name[name]
	total := cpus + object.get(node, ["used", "cpus"], 0)
	total > node.cpus * share
}

placement_deny contains {
	"rule": "node_capacity",
	"reason": sprintf("node %s would use %v of %v GB memory (limit %v%%)", [name, gb(total), gb(node.memory_mb), share * 100]),
} if {
	some name, mem in placed_mem
	node := nodes_by_name[name]
	total := mem + object.get(node, ["used", "memory_mb"], 0)
	total > node.memory_mb * share
}

placement_deny contains {
	"rule": "node_capacity",
	"reason": sprintf("placement names unknown node %s", [p.node]),
} if {
	some p in input.placement
	not nodes_by_name[p.node]
}
