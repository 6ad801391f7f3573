# GPU preservation (seed 000): GPUs reserved for inference are never
# allocated, and CPU-only roles (rollout workers, self-play) ask for no GPU
# while preservation is on. It is opt-in per cluster (data: enabled); the
# seed-000 pool turns it on with reserved_per_node 1.
package trainyard.admission

import rego.v1

deny contains {
	"rule": "gpu_preservation",
	"reason": sprintf("role %s asks for %v GPUs but GPU preservation keeps %s roles CPU-only", [role.name, role.gpus, role.name]),
} if {
	params.gpu_preservation.enabled
	some role in input.work.roles
	role.name in params.gpu_preservation.cpu_only_roles
	role.gpus > 0
}

placement_deny contains {
	"rule": "gpu_preservation",
	"reason": sprintf("role %s is placed on GPU %d of node %s, which is reserved for inference", [p.role, g.index, p.node]),
} if {
	some p in input.placement
	some g in object.get(p, "gpus", [])
	reserved(p.node, g.index)
}

# Work that needs more whole GPUs than the cluster has outside the inference
# reservation can never be placed: deny it up front instead of letting it
# wait forever (fractions round up per instance).
deny contains {
	"rule": "gpu_preservation",
	"reason": sprintf("work needs %d GPU(s) but only %d in the cluster are not reserved for inference", [needed, free_gpus.count]),
} if {
	params.gpu_preservation.enabled
	needed := sum([n | some r in input.work.roles; r.gpus > 0; n := r.count * ceil(r.gpus)])

	# CPU-only work (most of it, with preservation on) skips free_gpus.
	needed > 0
	needed > free_gpus.count
}
