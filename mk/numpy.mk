# NumPy for /usr/bin/python3: the Python env client (sdk/python, the
# README's Python block: `make python-numpy` after `make run`) and the
# self-play NPZ export's test (internal/selfplay/npz loads the written files
# with NumPy). Debian's python3-numpy is installed when missing (with sudo
# when not root); the NPZ test fails instead of skipping when
# TRAINYARD_REQUIRE_NUMPY is set.
export TRAINYARD_REQUIRE_NUMPY := 1

TEST_DEPS += python-numpy

SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: python-numpy selfplay-fuzz

python-numpy:
	@if /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1; then :; else \
		echo "installing Debian's python3-numpy for /usr/bin/python3"; \
		$(SUDO) apt-get update && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y python3-numpy; \
	fi

# The NPZ reader's fuzz target, 30 s.
selfplay-fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzRead$$' -fuzztime 30s ./internal/selfplay/npz/
