# Capabilities (docs/plugin-abi.md §9): a run grants its plugins inference
# endpoints no faster than params.capabilities.max_http_rate. With GPU
# preservation on, the GPUs serving endpoints are reserved.
#
# That a grant names an endpoint the cluster declares, and one the plugin
# declares it calls, is not decided here: a grant is resolved to the
# endpoint's definition at submission (api/capabilities.go, a 422 naming
# the field) and checked again when the agent loads the plugin, so a rule
# here would never decide (docs/scheduling.md, "Where each rule decides").
#
# Input: input.work.capabilities = {"http": [names], "http_rate": n},
# input.work.plugin_capabilities = ["http:llm", ...] (the env plugin's
# metadata, when known), input.cluster.endpoints = [{name, nodes, gpus}].
package trainyard.admission

import rego.v1

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
