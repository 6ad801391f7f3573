# WASM plugins (plugins/, sdk/): `make plugins` builds every example into
# .cache/plugins/*.wasm. Go plugins rebuild incrementally through Go's build
# cache; the AssemblyScript toolchain comes from npm (package-lock.json).
# The Go guest SDK (sdk/go) is a module of its own, outside the root's
# `go test ./...`: sdk-go-test vets and tests it (part of `make test`),
# sdk-go-bench runs its benchmarks (part of `make bench`).
PLUGINS_OUT := $(CACHE)/plugins
ASC := sdk/assemblyscript/node_modules/.bin/asc
GO_PLUGINS := cartpole pendulum shaping tictactoe ipd spread
AS_PLUGINS := cartpole-as reward-clip-as goleft ipd-as
AS_SDK_SRC := $(wildcard sdk/assemblyscript/assembly/*.ts)

.PHONY: plugins plugins-go plugins-clean FORCE_PLUGINS sdk-go-test sdk-go-bench

plugins: plugins-go $(AS_PLUGINS:%=$(PLUGINS_OUT)/%.wasm)

plugins-go: $(GO_PLUGINS:%=$(PLUGINS_OUT)/%.wasm)

$(PLUGINS_OUT)/%.wasm: FORCE_PLUGINS
	@mkdir -p $(PLUGINS_OUT)
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 $(GO) build -trimpath -buildmode=c-shared -o $@ ./plugins/$*

$(ASC): sdk/assemblyscript/package.json sdk/assemblyscript/package-lock.json
	cd sdk/assemblyscript && npm ci --no-audit --no-fund
	@touch $@

$(PLUGINS_OUT)/cartpole-as.wasm: $(ASC) $(AS_SDK_SRC) $(wildcard plugins/cartpole-as/assembly/*.ts)
	@mkdir -p $(PLUGINS_OUT)
	$(ASC) plugins/cartpole-as/assembly/index.ts -o $@ --runtime incremental -O3 --noAssert \
	  --use abort=sdk/assemblyscript/assembly/index/abortTrap

$(PLUGINS_OUT)/reward-clip-as.wasm: $(ASC) $(AS_SDK_SRC) $(wildcard plugins/reward-clip-as/assembly/*.ts)
	@mkdir -p $(PLUGINS_OUT)
	$(ASC) plugins/reward-clip-as/assembly/index.ts -o $@ --runtime incremental -O3 --noAssert \
	  --use abort=sdk/assemblyscript/assembly/index/abortTrap

$(PLUGINS_OUT)/ipd-as.wasm: $(ASC) $(AS_SDK_SRC) $(wildcard plugins/ipd-as/assembly/*.ts)
	@mkdir -p $(PLUGINS_OUT)
	$(ASC) plugins/ipd-as/assembly/index.ts -o $@ --runtime incremental -O3 --noAssert \
	  --use abort=sdk/assemblyscript/assembly/index/abortTrap

$(PLUGINS_OUT)/goleft.wasm: $(ASC) $(AS_SDK_SRC) sdk/assemblyscript/template/assembly/index.ts
	@mkdir -p $(PLUGINS_OUT)
	$(ASC) sdk/assemblyscript/template/assembly/index.ts -o $@ --runtime incremental -O3 --noAssert \
	  --use abort=sdk/assemblyscript/assembly/index/abortTrap

plugins-clean:
	rm -rf $(PLUGINS_OUT) $(CACHE)/plugintest

FORCE_PLUGINS:

sdk-go-test: testtimes
	@cd sdk/go && $(GO) vet ./... && $(call gotest,sdk-go,-race -count=1 ./...)

sdk-go-bench:
	cd sdk/go && $(GO) test -run '^$$' -bench . -benchmem ./...

TEST_DEPS += plugins sdk-go-test
BENCH_DEPS += plugins sdk-go-bench
