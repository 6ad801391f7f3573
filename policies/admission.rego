# Admission: every piece of work is evaluated against data.trainyard.admission.
# `allow` holds when no rule in `deny` fires; each denial is {rule, reason}.
# The rule files beside this one (gpu_preservation, capacity, tiers, quotas,
# providers) add to `deny`. Input is pre-aggregated by the Go side (usage
# totals, per-node used resources, and input.cluster.summary: largest GPU,
# GPU count, node shapes, providers, every GPU as {key, vram_mb, rank}),
# see internal/policy; rules that run on every submission read those instead
# of scanning every node and GPU.
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
# a submission without one skips them all with this one test.
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

# Reserved GPUs, as "node:index" strings: the explicit list plus the lowest
# reserved_per_node indices of every GPU node. The cluster summary lists
# every GPU with its key and its rank on its node (Go builds it once per
# fleet state); which of them are reserved is decided here.
reserved_gpus contains key if {
	params.gpu_preservation.enabled
	some key in params.gpu_preservation.reserved
}

reserved_gpus contains d.key if {
	params.gpu_preservation.enabled
	n := object.get(params.gpu_preservation, "reserved_per_node", 0)
	n > 0
	some d in input.cluster.summary.devices
	d.rank < n
}

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
# is the Go-side summary; with it, the unreserved GPUs are listed here, since
# which GPUs are reserved is policy.
largest_free_vram := input.cluster.summary.max_gpu_vram_mb if {
	not params.gpu_preservation.enabled
} else := max(array.concat(free_vram, [0]))

# VRAM of every unreserved GPU (only with preservation on). The reserved set
# is bound to a local and looked up as reserved_keys[key]: compiled to Wasm,
# `key in reserved_gpus` scans the set, and the interpreter evaluates
# reserved_gpus[key] on the rule afresh for each key; a bound set is one
# hash lookup in both (~40 µs less per decision on the seed-002 fleet).
free_vram := vram if {
	params.gpu_preservation.enabled
	reserved_keys := reserved_gpus
	vram := [d.vram_mb | some d in input.cluster.summary.devices; not reserved_keys[d.key]]
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
