package trainyard.admission_test

import rego.v1

import data.trainyard.admission

llm_cluster := object.union(fleet, {"endpoints": [{"name": "llm", "nodes": ["runpod-h100"], "gpus": 1}]})

llm_job(caps) := object.union(rl_job, {"capabilities": caps, "plugin_capabilities": ["http:llm"]})

test_granting_a_declared_endpoint_allowed if {
	admission.allow with input as {"work": llm_job({"http": ["llm"], "http_rate": 10}), "cluster": llm_cluster}
}

test_rate_over_the_cluster_limit_denied if {
	d := admission.deny with input as {"work": llm_job({"http": ["llm"], "http_rate": 500}), "cluster": llm_cluster}
		with data.trainyard.params.capabilities.max_http_rate as 100
	rules(d) == {"capabilities"}
}

test_unlimited_rate_denied_where_capped if {
	d := admission.deny with input as {"work": llm_job({"http": ["llm"]}), "cluster": llm_cluster}
		with data.trainyard.params.capabilities.max_http_rate as 100
	some x in d
	contains(x.reason, "unset (unlimited)")
}

test_no_capabilities_no_denial if {
	admission.allow with input as {"work": rl_job, "cluster": llm_cluster}
		with data.trainyard.params.capabilities.max_http_rate as 100
}

test_endpoint_gpus_reserved_under_preservation if {
	r := admission.reserved_gpus with input as {"cluster": llm_cluster}
		with data.trainyard.params.gpu_preservation.enabled as true
	r == {"runpod-h100:0"}
}

test_placement_on_an_endpoint_gpu_denied if {
	placement := [{"node": "runpod-h100", "role": "trainer", "cpus": 4, "memory_mb": 32000, "gpus": [{"index": 0, "share": 1}]}]
	d := admission.deny with input as {"work": training_job, "cluster": llm_cluster, "placement": placement}
		with data.trainyard.params.gpu_preservation.enabled as true
	rules(d) == {"gpu_preservation"}
}
