# Test hosts (internal/testhosts): network namespaces on a bridge, faults as
# nftables rules. Debian's iproute2 and nftables are installed when missing
# (as root: CI runs as root; elsewhere with sudo). The tests skip where
# namespaces cannot be made, and fail instead under CI=true.
TEST_DEPS += test-hosts-tools

.PHONY: test-hosts-tools

test-hosts-tools:
	@missing=; command -v ip >/dev/null || missing="$$missing iproute2"; command -v nft >/dev/null || missing="$$missing nftables"; \
	if [ -n "$$missing" ]; then echo "installing$$missing for the test hosts"; \
		$(SUDO) apt-get update && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y $$missing; fi
