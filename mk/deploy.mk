# Deployment files (deploy/): `make deploy-validate`, part of `make test`.
#  - Kubernetes: each kustomization under deploy/k8s is rendered with the real
#    kustomize and checked by kubeconform -strict against JSON schemas made
#    offline from the Kubernetes OpenAPI built into kustomize (deploy/validate/
#    cmd/k8s-schemas): kubeconform's schema repository is not reachable here.
#  - Everything else is Go tests in the deploy/validate module: Compose file
#    loaded by compose-go (what `docker compose config` runs), Dockerfile
#    through BuildKit's parser and build checks, and every flag and
#    TRAINYARD_* variable in the Kubernetes, Compose and systemd files
#    matched against the flags cmd/trainyard defines.
# Tools are built from the Go module proxy into .cache/bin once.
KUBECONFORM_VERSION := v0.8.0
KUSTOMIZE_VERSION := v5.8.2
KUBECONFORM := $(CACHE)/bin/kubeconform
KUSTOMIZE := $(CACHE)/bin/kustomize
K8S_SCHEMAS := $(CACHE)/k8s-schemas
# The Kubernetes version whose OpenAPI kustomize's kyaml carries.
K8S_SCHEMA_VERSION := 1.21.2
DEPLOY_VALIDATE_DIR := deploy/validate

.PHONY: deploy-validate deploy-validate-k8s deploy-validate-go

$(KUBECONFORM):
	@mkdir -p $(CACHE)/bin
	GOBIN=$(CACHE)/bin $(GO) install github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION)

$(KUSTOMIZE):
	@mkdir -p $(CACHE)/bin
	GOBIN=$(CACHE)/bin $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)

# Remade when the generator or its kyaml version changes.
$(K8S_SCHEMAS)/.stamp: $(DEPLOY_VALIDATE_DIR)/go.sum $(wildcard $(DEPLOY_VALIDATE_DIR)/k8sschema/*.go $(DEPLOY_VALIDATE_DIR)/cmd/k8s-schemas/*.go)
	rm -rf $(K8S_SCHEMAS)
	cd $(DEPLOY_VALIDATE_DIR) && $(GO) run ./cmd/k8s-schemas -out $(K8S_SCHEMAS)
	@touch $@

deploy-validate-k8s: testtimes $(KUBECONFORM) $(KUSTOMIZE) $(K8S_SCHEMAS)/.stamp
	@$(call timed,kubeconform,set -eo pipefail; for k in $$(find deploy/k8s -name kustomization.yaml | sort); do \
	  d=$$(dirname $$k); echo "kubeconform: $$d"; \
	  $(KUSTOMIZE) build $$d | $(KUBECONFORM) -strict -summary \
	    -kubernetes-version $(K8S_SCHEMA_VERSION) -schema-location $(K8S_SCHEMAS) -; \
	done)

deploy-validate-go: testtimes
	@cd $(DEPLOY_VALIDATE_DIR) && $(GO) vet ./... && $(call gotest,deploy-validate,-count=1 ./...)

deploy-validate: deploy-validate-k8s deploy-validate-go

TEST_DEPS += deploy-validate
