package trainyard.admission_test

import rego.v1

import data.trainyard.admission

seed000_pool := cluster(array.concat(
	[{"name": sprintf("g5-%d", [i]), "provider": "aws", "cpus": 7.5, "memory_mb": 30000, "gpus": [{"index": 0, "vram_mb": 23028}]} | some i in numbers.range(1, 6)],
	[{"name": sprintf("cpu-%d", [i]), "provider": "aws", "cpus": 63.5, "memory_mb": 127000} | some i in numbers.range(1, 2)],
))

rl_job := {"id": "zelda", "kind": "rollout", "config": "zelda", "roles": [rollout]}

test_cpu_only_rollout_allowed if {
	admission.allow with input as {"work": rl_job, "cluster": seed000_pool}
		with data.trainyard.params.gpu_preservation.enabled as true
		with data.trainyard.params.gpu_preservation.reserved_per_node as 1
}

test_rollout_asking_for_gpu_denied if {
	job := object.union(rl_job, {"roles": [object.union(rollout, {"gpus": 0.25})]})
	d := admission.deny with input as {"work": job, "cluster": seed000_pool}
		with data.trainyard.params.gpu_preservation.enabled as true
	rules(d) == {"gpu_preservation"}
}

test_rollout_gpu_allowed_when_preservation_off if {
	job := object.union(rl_job, {"roles": [object.union(rollout, {"gpus": 0.25})]})
	admission.allow with input as {"work": job, "cluster": seed000_pool}
}

test_reservations_ignored_when_preservation_off if {
	r := admission.reserved_gpus with input as {"cluster": seed000_pool}
		with data.trainyard.params.gpu_preservation.reserved_per_node as 1
	r == set()
}

test_reserved_per_node_lists_lowest_indices if {
	node := {"name": "n", "cpus": 8, "memory_mb": 1000, "gpus": [{"index": 3, "vram_mb": 1}, {"index": 1, "vram_mb": 1}, {"index": 2, "vram_mb": 1}]}
	r := admission.reserved_gpus with input as {"cluster": cluster([node])}
		with data.trainyard.params.gpu_preservation.enabled as true
		with data.trainyard.params.gpu_preservation.reserved_per_node as 2
	r == {"n:1", "n:2"}
}

test_placement_on_reserved_gpu_denied if {
	placement := [{"node": "runpod-h100", "role": "trainer", "cpus": 4, "memory_mb": 32000, "gpus": [{"index": 0, "share": 1}]}]
	d := admission.deny with input as {"work": training_job, "cluster": fleet, "placement": placement}
		with data.trainyard.params.gpu_preservation.enabled as true
		with data.trainyard.params.gpu_preservation.reserved as ["runpod-h100:0"]
	rules(d) == {"gpu_preservation"}
}

test_placement_on_unreserved_gpu_allowed if {
	placement := [{"node": "runpod-h100", "role": "trainer", "cpus": 4, "memory_mb": 32000, "gpus": [{"index": 0, "share": 1}]}]
	admission.allow with input as {"work": training_job, "cluster": fleet, "placement": placement}
		with data.trainyard.params.gpu_preservation.enabled as true
		with data.trainyard.params.gpu_preservation.reserved as ["nebius-l40s:0"]
}

test_all_gpus_reserved_leaves_no_gpu_for_training if {
	d := admission.deny with input as {"work": training_job, "cluster": fleet}
		with data.trainyard.params.gpu_preservation.enabled as true
		with data.trainyard.params.gpu_preservation.reserved_per_node as 1
	rules(d) == {"gpu_tier", "gpu_preservation"}
}

test_gpu_work_denied_when_every_gpu_is_reserved if {
	job := {"id": "train", "kind": "batch", "roles": [{"name": "trainer", "count": 1, "cpus": 1, "memory_mb": 100, "gpus": 1}]}
	d := admission.deny with input as {"work": job, "cluster": seed000_pool}
		with data.trainyard.params.gpu_preservation.enabled as true
		with data.trainyard.params.gpu_preservation.reserved_per_node as 1
	rules(d) == {"gpu_preservation"}
}

test_gpu_work_allowed_when_unreserved_gpus_remain if {
	job := {"id": "train", "kind": "batch", "roles": [{"name": "trainer", "count": 2, "cpus": 1, "memory_mb": 100, "gpus": 1}]}
	admission.allow with input as {"work": job, "cluster": seed000_pool}
		with data.trainyard.params.gpu_preservation.enabled as true
		with data.trainyard.params.gpu_preservation.reserved as ["g5-1:0", "g5-2:0"]
}

# free_gpus adds up the summary's per-rank totals when GPUs are reserved per
# node alone, and looks at every GPU when some are reserved by key.
# Reserving by key, on top, GPUs the per-node count reserves anyway must
# not change the answer; reserving another one by key takes it out.
test_free_gpus_by_rank_and_by_key_agree if {
	eight := {"name": "vast-8", "cpus": 64, "memory_mb": 512000, "gpus": [{"index": i, "vram_mb": 24576} | some i in numbers.range(0, 7)]}
	c := cluster([h100, l40s, eight])
	by_rank := admission.free_gpus with input as {"cluster": c}
		with data.trainyard.params.gpu_preservation.enabled as true
		with data.trainyard.params.gpu_preservation.reserved_per_node as 1
	by_rank == {"count": 7, "max_vram_mb": 24576}
	by_key := admission.free_gpus with input as {"cluster": c}
		with data.trainyard.params.gpu_preservation.enabled as true
		with data.trainyard.params.gpu_preservation.reserved_per_node as 1
		with data.trainyard.params.gpu_preservation.reserved as ["runpod-h100:0", "vast-8:0"]
	by_key == by_rank
	fewer := admission.free_gpus with input as {"cluster": c}
		with data.trainyard.params.gpu_preservation.enabled as true
		with data.trainyard.params.gpu_preservation.reserved_per_node as 1
		with data.trainyard.params.gpu_preservation.reserved as ["vast-8:5"]
	fewer == {"count": 6, "max_vram_mb": 24576}
	none := admission.free_gpus with input as {"cluster": c}
		with data.trainyard.params.gpu_preservation.enabled as true
	none == {"count": 10, "max_vram_mb": 81559}
}
