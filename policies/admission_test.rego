package trainyard.admission_test

import rego.v1

import data.trainyard.admission

test_allows_plain_training_job if {
	admission.allow with input as {"work": training_job, "cluster": fleet, "usage": {}}
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
