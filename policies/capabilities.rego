# Capabilities (docs/plugin-abi.md §9): a run may grant its plugins only
# inference endpoints declared for its cluster, only those its plugins
# declare they call, and no faster than params.capabilities.max_http_rate.
# With GPU preservation on, the GPUs serving endpoints are reserved.
#
# Input: input.work.capabilities = {"http": [names], "http_rate": n},
# input.work.plugin_capabilities = ["http:llm", ...] (the env plugin's
# metadata, when known), input.cluster.endpoints = [{name, nodes, gpus}].
package trainyard.admission

import rego.v1

declared_endpoints contains ep.name if some ep in object.get(input.cluster, "endpoints", [])

deny contains {
	"rule": "capabilities",
	"reason": sprintf("capabilities.http grants endpoint %q, which is not declared for the cluster (declared: %v)", [name, sort(declared_endpoints)]),
} if {
	some name in object.get(object.get(input.work, "capabilities", {}), "http", [])
	not name in declared_endpoints
}

# Least privilege: a grant the plugin does not ask for is refused, so a
# later plugin version cannot start using it unnoticed.
deny contains {
	"rule": "capabilities",
	"reason": sprintf("capabilities.http grants endpoint %q, which the plugin does not declare (it declares %v)", [name, sort(plugin_caps)]),
} if {
	input.work.plugin_capabilities
	plugin_caps := {c | some c in input.work.plugin_capabilities}
	some name in object.get(object.get(input.work, "capabilities", {}), "http", [])
	not concat(":", ["http", name]) in plugin_caps
}

deny contains {
	"rule": "capabilities",
	"reason": sprintf("capabilities.http_rate %v exceeds the cluster's limit of %v requests/s", [rate, limit]),
} if {
	limit := object.get(object.get(params, "capabilities", {}), "max_http_rate", 0)
	limit > 0
	rate := object.get(object.get(input.work, "capabilities", {}), "http_rate", 0)
	rate > limit
}

# A run that grants endpoints but sets no rate is unlimited: refused where
# the cluster caps rates.
deny contains {
	"rule": "capabilities",
	"reason": sprintf("capabilities.http_rate is unset (unlimited) but the cluster allows at most %v requests/s", [limit]),
} if {
	limit := object.get(object.get(params, "capabilities", {}), "max_http_rate", 0)
	limit > 0
	count(object.get(object.get(input.work, "capabilities", {}), "http", [])) > 0
	object.get(object.get(input.work, "capabilities", {}), "http_rate", 0) == 0
}

# GPUs serving an endpoint: the lowest `gpus` indices of each of its nodes.
reserved_by_key contains gpu_key(name, idx) if {
	params.gpu_preservation.enabled
	some ep in object.get(input.cluster, "endpoints", [])
	n := object.get(ep, "gpus", 0)
	n > 0
	some name in ep.nodes
	indices := sort([g.index | some g in object.get(nodes_by_name[name], "gpus", [])])
	some i, idx in indices
	i < n
}
