package trainyard.admission_test

import rego.v1

import data.trainyard.admission

test_training_preferring_ephemeral_denied if {
	job := object.union(training_job, {"providers": {"prefer": ["vast"]}})
	d := admission.deny with input as {"work": job, "cluster": fleet}
	d == {{"rule": "provider", "reason": "training work may not prefer ephemeral provider vast"}}
}

test_selfplay_may_prefer_ephemeral if {
	job := object.union(training_job, {"kind": "selfplay", "trains": false, "providers": {"prefer": ["vast"]}})
	admission.allow with input as {"work": job, "cluster": fleet}
}

test_training_placed_on_ephemeral_denied if {
	big_vast := object.union(rtx3060, {"gpus": [{"index": 0, "vram_mb": 49152}]})
	placement := [{"node": "vast-3060", "role": "trainer", "cpus": 1, "memory_mb": 1, "gpus": [{"index": 0, "share": 1}]}]
	d := admission.deny with input as {"work": training_job, "cluster": cluster([big_vast]), "placement": placement}
	d == {{"rule": "provider", "reason": "training role trainer is placed on node vast-3060 of ephemeral provider vast"}}
}

# A sweep trial trains too: kept off ephemeral nodes by the bundle as by
# the scheduler's filter (one definition: input.work.trains).
test_sweep_trial_placed_on_ephemeral_denied if {
	big_vast := object.union(rtx3060, {"gpus": [{"index": 0, "vram_mb": 49152}]})
	placement := [{"node": "vast-3060", "role": "trainer", "cpus": 1, "memory_mb": 1, "gpus": [{"index": 0, "share": 1}]}]
	trial := object.union(training_job, {"kind": "sweep-trial", "trains": true})
	d := admission.deny with input as {"work": trial, "cluster": cluster([big_vast]), "placement": placement}
	rules(d) == {"provider"}
}

# Inputs recorded before input.work.trains (dry runs replay them) decide
# by the kind, as they were decided.
test_recorded_input_without_trains if {
	big_vast := object.union(rtx3060, {"gpus": [{"index": 0, "vram_mb": 49152}]})
	placement := [{"node": "vast-3060", "role": "trainer", "cpus": 1, "memory_mb": 1, "gpus": [{"index": 0, "share": 1}]}]
	old := object.remove(training_job, {"trains"})
	d := admission.deny with input as {"work": old, "cluster": cluster([big_vast]), "placement": placement}
	rules(d) == {"provider"}
}

test_ephemeral_flag_counts_without_provider_list if {
	node := {"name": "spot", "provider": "aws", "ephemeral": true, "cpus": 8, "memory_mb": 64000, "gpus": [{"index": 0, "vram_mb": 81559}]}
	placement := [{"node": "spot", "role": "trainer", "cpus": 1, "memory_mb": 1, "gpus": [{"index": 0, "share": 1}]}]
	d := admission.deny with input as {"work": training_job, "cluster": cluster([node]), "placement": placement}
	rules(d) == {"provider"}
}

test_provider_order_by_kind if {
	c := cluster([h100, l40s, rtx3060, {"name": "vultr-1", "provider": "vultr", "cpus": 8, "memory_mb": 1}])
	training := admission.provider_order with input as {"work": {"kind": "training"}, "cluster": c}
	training == ["runpod", "nebius", "vultr"]
	selfplay := admission.provider_order with input as {"work": {"kind": "selfplay"}, "cluster": c}
	selfplay == ["vast", "vultr", "nebius", "runpod"]
	eval := admission.provider_order with input as {"work": {"kind": "evaluation"}, "cluster": c}
	eval == ["vast", "vultr", "nebius", "runpod"]
}
