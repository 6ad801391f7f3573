# TensorBoard event files (internal/scalars): internal/e2e's
# TestCurvesReadByProtobuf decodes the files a run wrote with Google's own
# protobuf runtime. Debian's python3-protobuf (for /usr/bin/python3) is
# installed when missing, and the test fails instead of skipping when
# TRAINYARD_REQUIRE_PROTOBUF is set.
export TRAINYARD_REQUIRE_PROTOBUF := 1

TEST_DEPS += tensorboard-protobuf

.PHONY: tensorboard-protobuf scalars-fuzz

tensorboard-protobuf:
	@if /usr/bin/python3 -c 'import google.protobuf' >/dev/null 2>&1; then :; else \
		echo "installing python3-protobuf for the TensorBoard event file test"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-protobuf; \
	fi

# The event file reader's fuzz target, 30 s.
scalars-fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeFile$$' -fuzztime 30s ./internal/scalars/
