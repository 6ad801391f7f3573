# Trainyard. `make run` starts everything; `make test` is what CI runs.
SHELL := /bin/bash
export GOTOOLCHAIN := local
GO ?= go
BIN := bin/trainyard
DATA ?= .trainyard
CACHE := $(CURDIR)/.cache

.PHONY: all build run bench openapi lint

# Fragments add targets and prerequisites (TEST_DEPS, BENCH_DEPS); included
# before the rules below so their prerequisite lists are complete.
include $(wildcard mk/*.mk)

all: build

build:
	$(GO) build -ldflags='-s -w' -o $(BIN) ./cmd/trainyard

run: build
	./$(BIN) dev --data-dir $(DATA)

# The one test command (README, .ci/run): mk/test.mk. Fragments in mk/ add
# prerequisites through TEST_DEPS (e.g. compiled plugins, the OPA CLI).

bench: $(BENCH_DEPS)
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m ./...

openapi:
	$(GO) run ./cmd/trainyard openapi > openapi.yaml

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run ./internal/tools/layercheck . sdk/go
