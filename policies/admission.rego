# Admission: every piece of work is evaluated against data.trainyard.admission.
# `allow` holds when no rule in `deny` fires; each denial is {rule, reason}.
# The rule files beside this one (gpu_preservation, capacity, tiers, quotas,
# providers) add to `deny`. Input is pre-aggregated by the Go side (usage
# totals, per-node used resources, and input.cluster.summary: largest GPU,
# GPU count, node shapes, providers, every GPU as {key, vram_mb, rank}, and
# per rank the GPU count and largest VRAM), see internal/policy; rules that
# run on every submission read those instead of scanning every node and GPU.
package trainyard.admission

import rego.v1

params := data.trainyard.params

default allow := false

allow if count(deny) == 0

deny contains {"rule": "input", "reason": "input.work is missing"} if not input.work

deny contains {"rule": "input", "reason": "input.cluster.nodes is missing"} if not input.cluster.nodes

# Without the summary the per-submission checks could not fire: fail closed.
deny contains {"rule": "input", "reason": "input.cluster.summary is missing"} if {
	input.cluster.nodes
	not input.cluster.summary
}

# Checks of a proposed placement (input.placement) go to placement_deny:
# a submission without one skips them all with this one test. The cluster
# workflow asks about every placement its scheduler proposes and commits
# none of them refuses (docs/scheduling.md, "Where each rule decides").
deny contains d if {
	input.placement
	some d in placement_deny
}

# Roles with at least one GPU requested (fractions count).
gpu_roles contains role if {
	some role in input.work.roles
	role.gpus > 0
}

# The board is the config's prefix unless given: hexagonal_4p -> hexagonal.
board := input.work.board if input.work.board

board := split(input.work.config, "_")[0] if {
	not input.work.board
	input.work.config
}

# Reserved GPUs, as "node:index" strings: those reserved by key (the
# explicit list, and the GPUs serving inference endpoints: capabilities.rego)
# plus the lowest reserved_per_node indices of every GPU node. The cluster
# summary lists every GPU with its key and its rank on its node (Go builds
# it once per fleet state); which of them are reserved is decided here.
reserved_gpus contains key if some key in reserved_by_key

reserved_gpus contains d.key if {
	params.gpu_preservation.enabled
	reserved_per_node > 0
	some d in input.cluster.summary.devices
	d.rank < reserved_per_node
}

reserved_by_key contains key if {
	params.gpu_preservation.enabled
	some key in params.gpu_preservation.reserved
}

reserved_per_node := object.get(params.gpu_preservation, "reserved_per_node", 0)

# The enabled check first: with preservation off no key is built.
reserved(node_name, idx) if {
	params.gpu_preservation.enabled
	gpu_key(node_name, idx) in reserved_gpus
}

# gpu_key is "node:index". Built with concat and format_int rather than
# sprintf: those run inside the compiled Wasm module, where sprintf is a
# call out to the host.
gpu_key(node_name, idx) := concat(":", [node_name, format_int(idx, 10)])

# Largest GPU that is not reserved for inference. Without preservation it
# is the Go-side summary; with it, free_gpus works it out, since which GPUs
# are reserved is policy.
largest_free_vram := input.cluster.summary.max_gpu_vram_mb if {
	not params.gpu_preservation.enabled
} else := free_gpus.max_vram_mb

# The unreserved GPUs as {count, max_vram_mb} (only with preservation on).
# With GPUs reserved per node alone, the summary's per-rank totals answer it
# in a step per rank (ranks run to the most GPUs on one node); reservations
# by key need every GPU looked at: one set lookup each, the reserved set
# bound to a local (compiled to Wasm, `key in reserved_gpus` scans the set,
# and the interpreter evaluates reserved_gpus[key] afresh for each key).
# On the seed-002 fleet (33 GPUs) the per-rank way saves ~5 µs a decision.
free_gpus := {"count": sum(counts), "max_vram_mb": max(array.concat(vrams, [0]))} if {
	params.gpu_preservation.enabled
	count(reserved_by_key) == 0
	ranks := [r | some i, r in input.cluster.summary.ranks; i >= reserved_per_node]
	counts := [r.gpus | some r in ranks]
	vrams := [r.max_vram_mb | some r in ranks]
} else := {"count": count(vrams), "max_vram_mb": max(array.concat(vrams, [0]))} if {
	params.gpu_preservation.enabled
	reserved_keys := reserved_gpus
	vrams := [d.vram_mb | some d in input.cluster.summary.devices; not reserved_keys[d.key]]
}

nodes_by_name[node.name] := node if some node in input.cluster.nodes

ephemeral_providers contains p if some p in params.providers.ephemeral

ephemeral(node) if node.ephemeral

ephemeral(node) if node.provider in ephemeral_providers

# Tier of a node by its total VRAM: the first tier whose floor it reaches
# (tiers are listed best first); 0 = no tier (CPU-only or tiny GPUs).
node_tier[node.name] := tier if {
	some node in input.cluster.nodes
	total := sum([g.vram_mb | some g in object.get(node, "gpus", [])])
	tiers := [t.tier | some t in params.tiers; total >= t.min_vram_mb]
	tier := min(array.concat(tiers, [0 | count(tiers) == 0]))
}

# Human units for reasons: GB with one decimal, percent with one decimal.
gb(mb) := round(mb / 100) / 10

pct(x) := round(x * 1000) / 10
