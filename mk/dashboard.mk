# The web dashboard at /ui (internal/dashboard) draws its charts with uPlot,
# served from the binary like /docs' renderer (mk/docs.mk), so it works in a
# lab without internet. internal/dashboard/ui/uplot/ holds the npm package's
# built files, checked in: building needs no network. `make ui-assets`
# fetches them again from npm (the version in its SOURCE; UPLOT_VERSION=x.y.z
# to move to another one).
#
# TestDashboard (internal/e2e) loads every page in headless Chromium
# against `trainyard dev` (Chromium: docs-chromium, in TEST_DEPS).

UPLOT_DIR := internal/dashboard/ui/uplot
UPLOT_VERSION ?= $(shell sed -n 's/^version: //p' $(UPLOT_DIR)/SOURCE)

.PHONY: ui-assets ui-test

ui-assets:
	@$(call npm-vendor,uplot,$(UPLOT_VERSION),$(UPLOT_DIR),dist/uPlot.iife.min.js dist/uPlot.min.css LICENSE) && \
	  echo "now run make ui-test and commit $(UPLOT_DIR)"

ui-test: docs-chromium
	$(GO) test -count=1 -run '^TestShell$$' ./internal/dashboard/
	$(GO) test -count=1 -run '^TestDashboard$$' ./internal/e2e/
