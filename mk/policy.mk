# Policies (policies/): `make policy-test` runs the real OPA CLI on the Rego
# modules, data and unit tests. The CLI is built from the Go module proxy into
# .cache/bin once, at the version go.mod pins for the library.
OPA_VERSION := v1.22.2
OPA := $(CACHE)/bin/opa

.PHONY: policy-test policy-bench policy-fuzz

$(OPA):
	@mkdir -p $(CACHE)/bin
	GOBIN=$(CACHE)/bin $(GO) install github.com/open-policy-agent/opa@$(OPA_VERSION)

# Formatting first: reviewers read policy diffs, so they stay `opa fmt` clean.
policy-test: testtimes $(OPA)
	@$(call timed,opa-test,$(OPA) fmt --list --fail policies/ && $(OPA) test policies/)

TEST_DEPS += policy-test

# The admission and placement numbers of `make bench` alone: decision p50/p99
# (BenchmarkDecide) and one scheduling round of 1,000 items on 100 nodes.
policy-bench:
	$(GO) test -run '^$$' -bench 'Decide|Schedule' -benchmem ./internal/policy/ ./internal/scheduler/

# The Wasm evaluator against OPA's interpreter on fuzzed inputs, 30 s.
policy-fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzWasmDecidesLikeTopdown$$' -fuzztime 30s ./internal/policy/
