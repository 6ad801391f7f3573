# Built-in plugins: `make build` compiles the example plugins that ship
# (plugins/) and packs them, gzipped with an index of their metadata, into
# plugins/builtin/wasm, which the binary embeds. `trainyard dev` and
# `trainyard server` register them on start; `plugin run NAME` finds them
# without a server. A `go build` without make gives a binary without them.
BUILTIN_DIR := plugins/builtin/wasm
BUILTIN_GO := cartpole pendulum shaping tictactoe arithmetic ipd spread
BUILTIN_AS := reward-clip-as
# Recursive and second-expanded: PLUGINS_OUT, KINROW_OUT and KINROW_CONFIGS
# come from fragments included after this one.
BUILTIN_WASM = $(BUILTIN_GO:%=$(PLUGINS_OUT)/%.wasm) $(BUILTIN_AS:%=$(PLUGINS_OUT)/%.wasm) \
	$(KINROW_CONFIGS:%=$(KINROW_OUT)/kinrow-%.wasm)

.PHONY: builtin-plugins
.SECONDEXPANSION:

build: builtin-plugins

builtin-plugins: $$(BUILTIN_WASM)
	$(GO) run ./internal/tools/builtinplugins -out $(BUILTIN_DIR) $(BUILTIN_WASM)

TEST_DEPS += builtin-plugins
BENCH_DEPS += builtin-plugins
