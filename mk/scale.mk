# `make scale`: one control plane against fleets of hollow nodes (issue
# 44), kubemark-style (internal/fleetload, internal/tools/scale). For each
# size a fresh `trainyard dev`, a cluster of static nodes served by
# `trainyard agent --simulate` processes, 10000 jobs of 1-120 s at up to
# 200/s; a table of join time, flaps, submission and placement latency,
# API latency under load, control plane CPU and RSS, Temporal's database
# growth and the cluster workflow's history (events, continue-as-new,
# heartbeat signals per node-minute). Results in .cache/scale/results.json
# and table.md, each size's logs in .cache/scale/<stamp>/n<size>/.
#
# Not part of `make test` (hours at the default sizes); TestFleetHollowNodes
# in internal/e2e is its correctness check there. SCALE_ARGS overrides the
# defaults, e.g. against an older control plane built from an earlier
# commit:
#   make scale SCALE_ARGS='--sizes 100 --jobs 1000 --dev-binary /tmp/old/trainyard'
#   make scale SCALE_ARGS='--sizes 3 --jobs 30 --real-agents --max-duration 10s'
SCALE_ARGS ?=

.PHONY: scale

scale: build
	@mkdir -p $(CACHE)/scale
	$(GO) run ./internal/tools/scale --dev-binary $(BIN) --agent-binary $(BIN) --out $(CACHE)/scale $(SCALE_ARGS)
