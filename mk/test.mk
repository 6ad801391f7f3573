# `make test` (what CI runs, .ci/run) and `make learn`.
#
# make test: the prerequisites in TEST_DEPS (installs, plugin builds, and
# the test steps other fragments add: ppo-learn, games-learn, sdk-go-test,
# deploy-validate, policy-test), lint, then two go test runs, one after
# the other (side by side they starved each other on CI's 2 cores: client
# timeouts in the chaos suite at a load of 20):
#  - race:   go test -race on every package but internal/e2e and chaos;
#  - norace: go test on NORACE_PKGS, e2e's tests two at a time beside
#    chaos's (one at a time: its timings are what it reports). At 3 e2e
#    tests and 2 chaos tests at once the load reached 21 and chaos's
#    CartPole run missed its 6-minute bound.
# Whatever happens, it ends with a time table (steps, packages, the slowest
# 10 tests, the whole run), also in .cache/test-times.txt; each run's whole
# output is in .cache/test-times/<run>.log, and .cache/test.log holds all.
#
# -race where it can find something. The race detector instruments the test
# binary only, so it stays on every package whose tests run our own
# concurrent code in-process (the API, the workflows under Temporal's test
# server, the agent's pieces, trajpool, rolloutworker, training's run-ahead,
# drain, distributed and loop tests, ...). It is off for:
#  - internal/e2e and internal/chaos: their tests start bin/trainyard (built
#    without -race) and its agents as child processes and only talk HTTP and
#    S3 to them; the instrumented test binary is a client that polls.
#  - internal/training's compute-only tests (exact resume, restore, curves
#    across lost segments: //go:build !race in their files): whole PPO
#    segments compared bit for bit, 15x slower under the detector (69 s
#    against 4.7 s for one segment test), with no goroutines of their own.
#    internal/training is in both runs: its concurrent tests run under -race,
#    the compute-only ones without; the norace run skips the concurrent
#    ones (RACE_COVERED: the tests of its files without the !race tag),
#    which cost it about 250 s a second time.
# The learning checks are compiled out under -race too (//go:build !race)
# and run without it in ppo-learn and games-learn, on a seed or two; `make
# learn` runs all their seeds (the norace run skips them: -skip ^TestLearn).
RACE_SKIP_PKGS := ./internal/e2e ./internal/chaos
# The race run's slowest packages, started first: go test starts packages
# in the order given, and internal/training (about 320 s under -race),
# started last in go list's order, ran alone for its last 160 s.
RACE_FIRST := ./internal/training ./internal/pluginhost ./internal/envserver ./internal/rolloutworker ./internal/provision/ssh
NORACE_PKGS := ./internal/e2e ./internal/chaos ./internal/training
RACE_COVERED := $(shell grep -L '^//go:build !race' internal/training/*_test.go | xargs grep -ho '^func Test[A-Za-z0-9_]*' | sed 's/^func //' | grep -vx TestMain | paste -sd'|')
# The test binaries are linked without DWARF (-w: a quarter of each link;
# stack traces and race reports use the symbol table, not DWARF), and
# without go test's vet pass (lint ran go vet ./... already).
GOTEST_FLAGS = -count=1 -vet=off -ldflags=-w -timeout $(TEST_TIMEOUT)
E2E_PARALLEL ?= 2
TEST_TIMEOUT ?= 45m

TESTTIMES := $(CACHE)/bin/testtimes
TT_DIR := $(CACHE)/test-times

# $(call gotest,NAME,ARGS): go test -json ARGS, its output shown the short
# way (package lines, failed tests whole), recorded as NAME for the table.
gotest = (set -o pipefail; $(GO) test -json $(2) 2>&1 | $(TESTTIMES) record $(TT_DIR) $(1))

# $(call timed,NAME,COMMAND): COMMAND, its wall time a step of the table.
timed = t0=$$(date +%s.%N); ( $(2) ); rc=$$?; \
	$(TESTTIMES) step $(TT_DIR) $(1) $$(awk "BEGIN{printf \"%.1f\", $$(date +%s.%N) - $$t0}") $$rc; exit $$rc

.PHONY: test test-steps test-go learn testtimes

testtimes:
	@mkdir -p $(CACHE)/bin
	@$(GO) build -o $(TESTTIMES) ./internal/tools/testtimes

# The table is printed after a failure too: test-steps runs in a sub-make
# whose status is kept. The failed tests' own output was shown as they
# failed (testtimes record); the end repeats which ones.
test: testtimes
	@$(TESTTIMES) begin $(TT_DIR)
	@$(MAKE) --no-print-directory test-steps; rc=$$?; \
	  cat $(TT_DIR)/*.log > $(CACHE)/test.log 2>/dev/null; \
	  if [ $$rc -ne 0 ]; then echo "--- failures (whole log: $(CACHE)/test.log):"; \
	    grep -ahE '^ *(--- FAIL|FAIL|panic:)' $(TT_DIR)/*.log | tail -60; fi; \
	  echo; $(TESTTIMES) table $(TT_DIR) $(CACHE)/test-times.txt; exit $$rc

test-steps: $$(TEST_DEPS)
	@$(call timed,lint,$(MAKE) --no-print-directory lint)
	@$(MAKE) --no-print-directory test-go

test-go:
	@race=$$($(GO) list $(RACE_FIRST) ./... | awk '!seen[$$0]++' | grep -vxF $(foreach p,$(RACE_SKIP_PKGS),-e $(patsubst ./%,github.com/trainyard/trainyard/%,$(p)))); \
	  echo "go test -race: all packages but $(RACE_SKIP_PKGS)"; \
	  ( $(call timed,race-run,$(call gotest,race,-race $(GOTEST_FLAGS) $$race)) ); rc=$$?; \
	  echo "go test -parallel $(E2E_PARALLEL) -skip '^TestLearn|<training's race-covered tests>' $(NORACE_PKGS)"; \
	  ( $(call timed,norace-run,$(call gotest,norace,$(GOTEST_FLAGS) -parallel $(E2E_PARALLEL) -skip '^(TestLearn|($(RACE_COVERED))$$)' $(NORACE_PKGS))) ); rc2=$$?; \
	  [ $$rc -eq 0 ] && [ $$rc2 -eq 0 ]

# Every seed of the learning checks that make test runs on one or two
# (ppo-learn, games-learn): CartPole and Pendulum with a run's defaults on
# seeds 0..9, CartPole solved within 50k steps on seeds 0..9, and internal/
# ppo's own learning tests, and internal/e2e's TestLearn* (the ASHA sweep
# to a solved CartPole). About 13 minutes on 2 cores (762 s).
learn:
	TRAINYARD_LEARN_FULL=1 $(GO) test -count=1 -run '^TestLearn' -timeout 20m ./internal/ppo/
	TRAINYARD_LEARN_SEEDS=0-9 $(GO) test -count=1 -v -run '^TestLearnDefaults' -timeout 60m ./internal/training/
	TRAINYARD_LEARN_SEEDS=0-4 $(GO) test -count=1 -v -run '^TestLearnCartPole$$' -timeout 20m ./internal/dqn/
	$(GO) test -count=1 -run '^TestLearnsToBeatRandom$$' -timeout 10m ./internal/selfplay/model/
	$(GO) test -count=1 -run '^TestLearn' -timeout 20m ./internal/e2e/
