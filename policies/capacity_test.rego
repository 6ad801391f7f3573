package trainyard.admission_test

import rego.v1

import data.trainyard.admission

job_with(role) := {"id": "w", "kind": "rollout", "config": "zelda", "roles": [role]}

test_request_share_table if {
	cases := [
		# 6 CPUs / 24 GB fit 90% of a g5.2xlarge (6.75 CPUs, 27 GB).
		{"role": {"name": "r", "cpus": 6, "gpus": 0, "memory_mb": 24000}, "allow": true},
		{"role": {"name": "r", "cpus": 6.75, "gpus": 0, "memory_mb": 27000}, "allow": true},
		{"role": {"name": "r", "cpus": 7, "gpus": 0, "memory_mb": 24000}, "allow": false},
		{"role": {"name": "r", "cpus": 6, "gpus": 0, "memory_mb": 28000}, "allow": false},
	]
	every c in cases {
		got := admission.allow with input as {"work": job_with(c.role), "cluster": cluster([g5])}
		got == c.allow
	}
}

test_request_over_share_reason if {
	d := admission.deny with input as {"work": job_with({"name": "big", "cpus": 7, "gpus": 0, "memory_mb": 1000}), "cluster": cluster([g5])}
	d == {{"rule": "node_capacity", "reason": "role big asks for 7 CPUs and 1 GB per instance; no node offers that within 90% of its capacity"}}
}

test_share_is_configurable if {
	admission.allow with input as {"work": job_with({"name": "r", "cpus": 7, "gpus": 0, "memory_mb": 1000}), "cluster": cluster([g5])}
		with data.trainyard.params.capacity_share as 1
}

test_placement_counts_existing_use if {
	node := object.union(g5, {"used": {"cpus": 1, "memory_mb": 0}})
	placement := [{"node": "g5-1", "role": "r", "cpus": 6, "memory_mb": 1000}]
	d := admission.deny with input as {"work": job_with({"name": "r", "cpus": 6, "gpus": 0, "memory_mb": 1000}), "cluster": cluster([node]), "placement": placement}
	d == {{"rule": "node_capacity", "reason": "node g5-1 would use 7 of 7.5 CPUs (limit 90%)"}}
}

test_placement_sums_instances_on_a_node if {
	placement := [
		{"node": "g5-1", "role": "a", "cpus": 1, "memory_mb": 14000},
		{"node": "g5-1", "role": "b", "cpus": 1, "memory_mb": 7000, "count": 2},
	]
	d := admission.deny with input as {"work": job_with({"name": "a", "cpus": 1, "gpus": 0, "memory_mb": 1000}), "cluster": cluster([g5]), "placement": placement}
	d == {{"rule": "node_capacity", "reason": "node g5-1 would use 28 of 30 GB memory (limit 90%)"}}
}

test_placement_unknown_node if {
	placement := [{"node": "ghost", "role": "a", "cpus": 1, "memory_mb": 1}]
	d := admission.deny with input as {"work": job_with({"name": "a", "cpus": 1, "gpus": 0, "memory_mb": 1}), "cluster": cluster([g5]), "placement": placement}
	rules(d) == {"node_capacity"}
}
