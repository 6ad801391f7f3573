# Providers (seed 002): training avoids ephemeral providers (they vanish
# without warning); self-play prefers the cheap ones.
package trainyard.admission

import rego.v1

deny contains {
	"rule": "provider",
	"reason": sprintf("training work may not prefer ephemeral provider %s", [p]),
} if {
	trains
	some p in object.get(input.work, ["providers", "prefer"], [])
	p in ephemeral_providers
}

placement_deny contains {
	"rule": "provider",
	"reason": sprintf("training role %s is placed on node %s of ephemeral provider %s", [p.role, p.node, node.provider]),
} if {
	trains
	some p in input.placement
	node := nodes_by_name[p.node]
	ephemeral(node)
}

# trains: the work trains a model (trainings and sweep trials), as the
# scheduler's ephemeral filter counts it (workspec.Trains, sent as
# input.work.trains); inputs recorded before it say only the kind.
trains := object.get(input.work, "trains", input.work.kind == "training")

# provider_order ranks the cluster's providers for this work: the kind's
# preferred providers first, then the rest cheapest first; providers the
# kind avoids are left out.
prefs := object.get(params.providers.preferences, input.work.kind, {})

cluster_providers contains p if some p in input.cluster.summary.providers

cost(p) := object.get(params.providers.cost_per_gpu_hour, p, 1000)

provider_order := array.concat(preferred, rest) if {
	preferred := [p | some p in object.get(prefs, "prefer", []); p in cluster_providers]
	avoid := {p | some p in object.get(prefs, "avoid", [])}
	ranked := sort([[cost(p), p] | some p in cluster_providers; not p in preferred; not p in avoid])
	rest := [pair[1] | some pair in ranked]
}
