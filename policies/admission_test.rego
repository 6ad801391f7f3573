package trainyard.admission_test

import rego.v1

import data.trainyard.admission

test_allows_plain_training_job if {
	admission.allow with input as {"work": training_job, "cluster": fleet, "usage": {}}
}

test_missing_cluster_summary_denied if {
	d := admission.deny with input as {"work": training_job, "cluster": {"nodes": fleet.nodes}}
	{"rule": "input", "reason": "input.cluster.summary is missing"} in d
	not admission.allow with input as {"work": training_job, "cluster": {"nodes": fleet.nodes}}
}

test_cluster_summary if {
	c := cluster([h100, l40s, rtx3060, g5, {"name": "cpu", "cpus": 64, "memory_mb": 64000}, {"name": "cpu-big", "cpus": 64, "memory_mb": 128000}])
	c.summary == {
		"max_gpu_vram_mb": 81559,
		"gpus": 4,
		"shapes": [{"cpus": 32, "memory_mb": 256000}, {"cpus": 64, "memory_mb": 128000}],
		"providers": ["aws", "nebius", "runpod", "vast"],
		"devices": [
			{"key": "runpod-h100:0", "vram_mb": 81559, "rank": 0},
			{"key": "nebius-l40s:0", "vram_mb": 46068, "rank": 0},
			{"key": "vast-3060:0", "vram_mb": 12288, "rank": 0},
			{"key": "g5-1:0", "vram_mb": 23028, "rank": 0},
		],
		"ranks": [{"gpus": 4, "max_vram_mb": 81559}],
	}
	s := cluster([h100, {"name": "fat", "cpus": 8, "memory_mb": 512000}]).summary.shapes
	s == [{"cpus": 8, "memory_mb": 512000}, {"cpus": 32, "memory_mb": 256000}]
}

# A GPU's rank counts its node's GPUs with a lower index, whatever order the
# agent listed them in.
test_cluster_summary_device_ranks if {
	twin := {"name": "twin", "cpus": 8, "memory_mb": 64000, "gpus": [{"index": 3, "vram_mb": 24000}, {"index": 1, "vram_mb": 24000}]}
	ranks := [[d.key, d.rank] | some d in cluster([twin]).summary.devices]
	ranks == [["twin:3", 1], ["twin:1", 0]]
	by_rank := cluster([twin, h100]).summary.ranks
	by_rank == [{"gpus": 2, "max_vram_mb": 81559}, {"gpus": 1, "max_vram_mb": 24000}]
}

test_missing_work_denied if {
	d := admission.deny with input as {"cluster": fleet}
	rules(d) == {"input"}
	not admission.allow with input as {"cluster": fleet}
}

test_board_from_config if {
	admission.board == "hexagonal" with input as {"work": training_job, "cluster": fleet}
}

test_explicit_board_wins if {
	admission.board == "square19" with input as {"work": object.union(training_job, {"board": "square19"}), "cluster": fleet}
}

test_node_tiers_by_total_vram if {
	tiers := admission.node_tier with input as {"cluster": {"nodes": [
		h100, l40s, rtx3060,
		{"name": "vast-8x4090", "provider": "vast", "cpus": 64, "memory_mb": 256000, "gpus": [{"index": i, "vram_mb": 24564} | some i in numbers.range(0, 7)]},
		{"name": "cpu", "provider": "aws", "cpus": 64, "memory_mb": 127000},
	]}}
	tiers == {"runpod-h100": 1, "nebius-l40s": 2, "vast-3060": 3, "vast-8x4090": 1, "cpu": 0}
}
