# Self-play NPZ export (internal/selfplay/npz): its test loads the written
# files with NumPy. Debian's python3-numpy (for /usr/bin/python3) is
# installed when missing, and the test fails instead of skipping when
# TRAINYARD_REQUIRE_NUMPY is set.
export TRAINYARD_REQUIRE_NUMPY := 1

TEST_DEPS += selfplay-numpy

.PHONY: selfplay-numpy selfplay-fuzz

selfplay-numpy:
	@if /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1; then :; else \
		echo "installing python3-numpy for the NPZ export tests"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-numpy; \
	fi

# The NPZ reader's fuzz target, 30 s.
selfplay-fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzRead$$' -fuzztime 30s ./internal/selfplay/npz/
