# Shared fixtures for the policy tests: a small mixed fleet (seed 002 style)
# and a seed-000 style CPU-only rollout job.
package trainyard.admission_test

import rego.v1

h100 := {"name": "runpod-h100", "provider": "runpod", "ephemeral": false, "cpus": 32, "memory_mb": 256000, "gpus": [{"index": 0, "vram_mb": 81559}]}

l40s := {"name": "nebius-l40s", "provider": "nebius", "ephemeral": false, "cpus": 16, "memory_mb": 128000, "gpus": [{"index": 0, "vram_mb": 46068}]}

rtx3060 := {"name": "vast-3060", "provider": "vast", "ephemeral": true, "cpus": 8, "memory_mb": 64000, "gpus": [{"index": 0, "vram_mb": 12288}]}

g5 := {"name": "g5-1", "provider": "aws", "ephemeral": false, "cpus": 7.5, "memory_mb": 30000, "gpus": [{"index": 0, "vram_mb": 23028}]}

fleet := cluster([h100, l40s, rtx3060])

# cluster is the cluster document as the Go side sends it: the nodes plus
# their summary (internal/policy's summaryTerm; TestSummaryMatchesRego checks
# that both compute the same document).
cluster(nodes) := {"nodes": nodes, "summary": {
	"max_gpu_vram_mb": max(array.concat(vrams, [0])),
	"gpus": count(vrams),
	"shapes": [{"cpus": s[0], "memory_mb": s[1]} | some s in sort(maximal)],
	"providers": sort({n.provider | some n in nodes; n.provider != ""}),
	"devices": devices,
	"ranks": [{"gpus": count(vs), "max_vram_mb": max(vs)} |
		some r in numbers.range(0, max_rank)
		vs := [d.vram_mb | some d in devices; d.rank == r]
		count(vs) > 0 # without GPUs the range is [0, -1]
	],
}} if { 	devices := [device(n, g, gs) | some n in nodes; gs := object.get(n, "gpus", []); some g in gs]
	max_rank := max(array.concat([d.rank | some d in devices], [-1]))
	vrams := [g.vram_mb | some n in nodes; some g in object.get(n, "gpus", [])]
	shapes := {[n.cpus, n.memory_mb] | some n in nodes}
	maximal := {s | some s in shapes; not dominated(s, shapes)}
}

device(n, g, gs) := {
	"key": concat(":", [n.name, format_int(g.index, 10)]),
	"vram_mb": g.vram_mb,
	"rank": count([o | some o in gs; o.index < g.index]),
}

# dominated: another shape has at least as many CPUs and as much memory.
dominated(s, shapes) if {
	some o in shapes
	o != s
	o[0] >= s[0]
	o[1] >= s[1]
}

trainer := {"name": "trainer", "count": 1, "cpus": 4, "gpus": 1, "memory_mb": 32000}

rollout := {"name": "rollout_worker", "count": 7, "cpus": 6, "gpus": 0, "memory_mb": 24000}

training_job := {"id": "w1", "kind": "training", "trains": true, "config": "hexagonal_4p", "roles": [trainer]}

rules(denials) := {d.rule | some d in denials}
