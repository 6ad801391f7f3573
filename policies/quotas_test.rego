package trainyard.admission_test

import rego.v1

import data.trainyard.admission

day_tier1 := 5 * 86400 # five Tier-1 GPUs over a 24 h window

# As the Go side sends it: totals and each config's share of the capacity.
usage(config, seconds) := {
	"tier1_capacity_seconds": day_tier1,
	"tier1_gpu_seconds_by_config": {config: seconds},
	"tier1_share_by_config": {config: seconds / day_tier1},
}

test_quota_lookup_table if {
	cases := [
		{"config": "hexagonal_4p", "quota": 0.25},
		{"config": "square19_2p", "quota": 0.05},
		{"config": "square8_3p", "quota": 0.10},
		{"config": "hex8_2p", "quota": 0.10},
	]
	every c in cases {
		q := admission.quota with input as {"work": {"config": c.config}}
		q == c.quota
	}
	not admission.quota with input as {"work": {"config": "hexagonal_5p"}}
}

matches(pattern, config) if admission.config_matches(pattern, config)

else := false

# The prefix fast path matches exactly what glob.match with "_" as the
# delimiter matches, and other patterns still go to glob.match.
test_config_patterns_match_as_glob if {
	cases := [
		["square8_*", "square8_2p"], ["square8_*", "square8_"], ["square8_*", "square8_2p_x"],
		["square8_*", "square8"], ["square8_*", "square19_2p"], ["square*", "square8"],
		["*_2p", "hex8_2p"], ["*_2p", "hex8_3p"], ["sq?are8_*", "square8_4p"], ["hex[89]_*", "hex9_2p"],
		["*", "hexagonal_2p"], ["*", "zelda"],
	]
	every c in cases {
		matches(c[0], c[1]) == glob.match(c[0], ["_"], c[1])
	}
	not admission.config_matches("square8_*", "square8_2p_x")
	admission.config_matches("square8_*", "square8_2p")
	admission.config_matches("*_2p", "hex8_2p")
}

test_hexagonal_4p_within_quota_allowed if {
	admission.allow with input as {"work": training_job, "cluster": fleet, "usage": usage("hexagonal_4p", 0.25 * day_tier1)}
}

test_hexagonal_4p_over_quota_denied if {
	d := admission.deny with input as {"work": training_job, "cluster": fleet, "usage": usage("hexagonal_4p", 0.26 * day_tier1)}
	d == {{"rule": "config_quota", "waits": true, "reason": "config hexagonal_4p used 26% of Tier-1 GPU time over the last 24h; its quota is 25%"}}
}

test_other_configs_usage_does_not_count if {
	admission.allow with input as {"work": training_job, "cluster": fleet, "usage": usage("hexagonal_2p", 0.9 * day_tier1)}
}

test_cpu_only_work_not_subject_to_quota if {
	job := {"id": "c", "kind": "rollout", "config": "hexagonal_4p", "roles": [{"name": "r", "cpus": 1, "gpus": 0, "memory_mb": 1}]}
	admission.allow with input as {"work": job, "cluster": fleet, "usage": usage("hexagonal_4p", day_tier1)}
}

test_one_training_per_config if {
	u := {"running_training_by_config": {"hexagonal_4p": 1}}
	d := admission.deny with input as {"work": training_job, "cluster": fleet, "usage": u}
	d == {{"rule": "one_training_per_config", "waits": true, "reason": "config hexagonal_4p already has 1 training job(s) running; at most 1 at a time"}}
	selfplay := object.union(training_job, {"kind": "selfplay", "trains": false})
	admission.allow with input as {"work": selfplay, "cluster": fleet, "usage": u}
}

test_starvation_boost_after_4h if {
	cases := [
		{"waiting": 0, "priority": 5},
		{"waiting": 14399, "priority": 5},
		{"waiting": 14400, "priority": 105},
		{"waiting": 86400, "priority": 105},
	]
	every c in cases {
		p := admission.priority with input as {"work": {"priority": 5, "waiting_seconds": c.waiting}}
		p == c.priority
	}
}
