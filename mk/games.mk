# Games and self-play engines (sdk/go/games, plugins/kinrow,
# internal/selfplay/engine, internal/selfplay/model; docs/games.md).
#
# The learning test (a square8_2p model trained by self-play beats random;
# ~7 s) is compiled out under -race, so `make test` runs it here first
# without -race, like PPO's. `make bench` picks up BenchmarkSelfPlay
# (games/h/core for square8_2p, heuristic and MCTS) from `go test -bench .
# ./...`; tests build the plugins they need on demand (plugintest.BuildGo).
TEST_DEPS += games-learn

KINROW_OUT := $(CACHE)/plugins
KINROW_CONFIGS := $(foreach b,hex8 square8 square19 hexagonal,$(foreach p,2 3 4,$(b)_$(p)p))

.PHONY: games-learn games-bench games-fuzz kinrow-plugins

games-learn: testtimes
	@$(call gotest,games-learn,-count=1 -run '^TestLearnsToBeatRandom$$' -timeout 10m ./internal/selfplay/model/)

# Self-play throughput alone.
games-bench:
	$(GO) test -run '^$$' -bench '^BenchmarkSelfPlay$$' ./internal/selfplay/engine/

# Random legal play against the rules' invariants, and the model file
# parser, 30 s each.
games-fuzz:
	cd sdk/go && $(GO) test -run '^$$' -fuzz '^FuzzRandomPlay$$' -fuzztime 30s ./games/kinrow/
	$(GO) test -run '^$$' -fuzz '^FuzzUnmarshal$$' -fuzztime 30s ./internal/selfplay/model/

# Every k-in-a-row config as a plugin module: .cache/plugins/kinrow-<config>.wasm
# (e.g. to upload with `trainyard plugin upload`).
kinrow-plugins: $(KINROW_CONFIGS:%=$(KINROW_OUT)/kinrow-%.wasm)

$(KINROW_OUT)/kinrow-%.wasm: FORCE_PLUGINS
	@mkdir -p $(KINROW_OUT)
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 $(GO) build -trimpath -buildmode=c-shared -o $@ ./plugins/kinrow/$*
