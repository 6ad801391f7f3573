# Cluster groundwork (internal/cluster/spec, internal/agent/{detect,procenv},
# internal/provision/...). The ssh provisioner's tests start a real OpenSSH
# server; make sure one is installed, and make those tests fail instead of
# skipping when it is missing.
export TRAINYARD_REQUIRE_SSHD := 1

TEST_DEPS += cluster-sshd

CLUSTER_PKGS := ./internal/cluster/... ./internal/agent/detect/... ./internal/agent/procenv/... ./internal/provision/...

.PHONY: cluster-sshd cluster-test cluster-fuzz

cluster-sshd:
	@if [ -x /usr/sbin/sshd ] || command -v sshd >/dev/null 2>&1; then :; else \
		echo "installing openssh-server for the ssh provisioner tests"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y openssh-server; \
	fi

cluster-test: cluster-sshd
	$(GO) test -race $(CLUSTER_PKGS)

# The parsers' fuzz targets, 30 s each.
cluster-fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 30s ./internal/agent/detect/gpudesc/
	$(GO) test -run '^$$' -fuzz '^FuzzParseNvidiaSMI$$' -fuzztime 30s ./internal/agent/detect/
	$(GO) test -run '^$$' -fuzz '^FuzzQuote$$' -fuzztime 30s ./internal/provision/lifecycle/
