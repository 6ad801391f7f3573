package trainyard.admission_test

import rego.v1

import data.trainyard.admission

test_board_min_vram_table if {
	cases := [
		{"config": "hex8_2p", "nodes": [rtx3060], "allow": true},
		{"config": "square8_2p", "nodes": [rtx3060], "allow": true},
		{"config": "square19_2p", "nodes": [rtx3060], "allow": false},
		{"config": "square19_2p", "nodes": [g5], "allow": true},
		{"config": "hexagonal_2p", "nodes": [g5, rtx3060], "allow": false},
		{"config": "hexagonal_2p", "nodes": [l40s], "allow": true},
	]
	every c in cases {
		job := {"id": "s", "kind": "selfplay", "config": c.config, "roles": [{"name": "player", "cpus": 1, "gpus": 0.5, "memory_mb": 1000}]}
		got := admission.allow with input as {"work": job, "cluster": cluster(c.nodes)}
		got == c.allow
	}
}

test_board_too_big_reason if {
	d := admission.deny with input as {"work": training_job, "cluster": cluster([rtx3060]), "usage": {}}
	{"rule": "gpu_tier", "reason": "board hexagonal needs a GPU with at least 32 GB VRAM; the largest unreserved GPU has 12.3 GB"} in d
}

test_cpu_only_work_ignores_board if {
	job := {"id": "c", "kind": "rollout", "config": "hexagonal_2p", "roles": [{"name": "r", "cpus": 1, "gpus": 0, "memory_mb": 1}]}
	admission.allow with input as {"work": job, "cluster": cluster([rtx3060])}
}

test_unknown_board_denied if {
	job := {"id": "c", "kind": "selfplay", "config": "chess_2p", "board": "chess", "roles": [{"name": "p", "cpus": 1, "gpus": 1, "memory_mb": 1}]}
	d := admission.deny with input as {"work": job, "cluster": fleet}
	rules(d) == {"gpu_tier"}
}

test_config_without_board_has_no_vram_floor if {
	job := {"id": "a", "kind": "training", "config": "pong", "roles": [object.union(trainer, {"memory_mb": 8000})]}
	admission.allow with input as {"work": job, "cluster": cluster([g5])}
}

test_placement_on_small_gpu_denied if {
	placement := [{"node": "vast-3060", "role": "trainer", "cpus": 1, "memory_mb": 1, "gpus": [{"index": 0, "share": 1}]}]
	job := object.union(training_job, {"kind": "evaluation", "trains": false})
	d := admission.deny with input as {"work": job, "cluster": fleet, "placement": placement}
	d == {{"rule": "gpu_tier", "reason": "role trainer is placed on GPU 0 of node vast-3060 with 12.3 GB; board hexagonal needs 32 GB"}}
}
