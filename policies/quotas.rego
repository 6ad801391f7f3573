# Quotas (seed 002 config_quotas): a config's share of Tier-1 GPU time over
# the rolling window, at most max_training_per_config training jobs per
# config, and a priority boost for work starved longer than the threshold.
# The Go side aggregates usage over the window into totals and shares.
package trainyard.admission

import rego.v1

# Exact config names win over glob patterns such as square8_* ("_" is
# the delimiter: * matches within one part of the name).
quota := q if {
	q := params.config_quotas[input.work.config]
} else := q if {
	matches := [v | some pattern, v in params.config_quotas; config_matches(pattern, input.work.config)]
	count(matches) > 0
	q := min(matches)
}

# A pattern whose only wildcard is a trailing * (square8_*, the usual
# form) is a prefix followed by one part: matched with string builtins,
# because OPA's Wasm glob.match compiles its pattern on every call (it
# tripled the cost of a decision). Other patterns go to glob.match.
config_matches(pattern, config) if {
	prefix_pattern(pattern)
	prefix := trim_suffix(pattern, "*")
	startswith(config, prefix)
	not contains(substring(config, count(prefix), -1), "_")
}

config_matches(pattern, config) if {
	contains(pattern, "*")
	not prefix_pattern(pattern)
	glob.match(pattern, ["_"], config)
}

prefix_pattern(pattern) if {
	endswith(pattern, "*")
	every c in ["*", "?", "[", "{", "\\"] {
		not contains(trim_suffix(pattern, "*"), c)
	}
}

# The config's share of the window's Tier-1 GPU time: its GPU seconds over
# the capacity, divided on the Go side (defined when there is capacity).
tier1_share := input.usage.tier1_share_by_config[input.work.config]

deny contains {
	"rule": "config_quota",
	"waits": true,
	"reason": sprintf("config %s used %v%% of Tier-1 GPU time over the last %vh; its quota is %v%%", [input.work.config, pct(tier1_share), params.quota_window_hours, pct(quota)]),
} if {
	count(gpu_roles) > 0
	tier1_share > quota
}

deny contains {
	"rule": "one_training_per_config",
	"waits": true,
	"reason": sprintf("config %s already has %d training job(s) running; at most %d at a time", [input.work.config, running, limit]),
} if {
	input.work.kind == "training"
	limit := object.get(params, "max_training_per_config", 1)
	running := object.get(input.usage, ["running_training_by_config", input.work.config], 0)
	running >= limit
}

# Effective priority: work starved longer than boost_after_seconds is
# boosted so it sorts ahead of fresher work of the same base priority.
starved if object.get(input.work, "waiting_seconds", 0) >= params.starvation.boost_after_seconds

priority := object.get(input.work, "priority", 0) + params.starvation.boost if {
	starved
} else := object.get(input.work, "priority", 0)
