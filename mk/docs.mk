# The API reference at /docs (api/docs.go) is Stoplight Elements served from
# the binary, so that it renders in a lab without internet. api/docsui/
# holds the npm package's built files, checked in: building needs no
# network. `make docs-assets` fetches them again from npm (the version in
# api/docsui/SOURCE; ELEMENTS_VERSION=x.y.z to move to another one).
#
# TestDocsRenderOffline (api/docs_chromium_test.go) renders /docs in
# headless Chromium with the network off; make sure Chromium is installed,
# and make that test fail instead of skipping when it is missing.
export TRAINYARD_REQUIRE_CHROMIUM := 1

TEST_DEPS += docs-chromium

DOCSUI := api/docsui
ELEMENTS_VERSION ?= $(shell sed -n 's/^version: //p' $(DOCSUI)/SOURCE)

.PHONY: docs-chromium docs-assets docs-test

docs-chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; else \
		echo "installing chromium for the /docs rendering test"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	fi

# $(call npm-vendor,PACKAGE,VERSION,DIR,FILES): copy FILES (paths inside
# the package) of PACKAGE@VERSION from npm into DIR, and record the version
# and the npm integrity of the tarball in DIR/SOURCE. Also used by
# ui-assets (mk/dashboard.mk).
npm-vendor = test -n "$(2)" || { echo "$(1): version unknown (no $(3)/SOURCE?)"; exit 1; }; \
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	(cd "$$tmp" && npm pack --silent $(1)@$(2) >/dev/null && tar -xzf *.tgz) && \
	for f in $(4); do cp "$$tmp/package/$$f" $(3)/ || exit 1; done && \
	printf 'package: %s\nversion: %s\nintegrity: %s\n' "$(1)" "$(2)" "$$(npm view $(1)@$(2) dist.integrity)" > $(3)/SOURCE && \
	echo "$(3): $(1) $(2)"

docs-assets:
	@$(call npm-vendor,@stoplight/elements,$(ELEMENTS_VERSION),$(DOCSUI),web-components.min.js web-components.min.js.LICENSE.txt styles.min.css LICENSE) && \
	  echo "now run make docs-test and commit $(DOCSUI)"

docs-test: docs-chromium
	$(GO) test -count=1 -run '^TestDocs' ./api/
