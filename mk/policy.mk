# Policies (policies/): `make policy-test` runs the real OPA CLI on the Rego
# modules, data and unit tests. The CLI is built from the Go module proxy into
# .cache/bin once, at the version go.mod pins for the library.
OPA_VERSION := v1.22.2
OPA := $(CACHE)/bin/opa

.PHONY: policy-test

$(OPA):
	@mkdir -p $(CACHE)/bin
	GOBIN=$(CACHE)/bin $(GO) install github.com/open-policy-agent/opa@$(OPA_VERSION)

policy-test: $(OPA)
	$(OPA) test policies/ -v

TEST_DEPS += policy-test
