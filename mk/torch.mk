# Python trainers (sdk/python, internal/envserver): the PyTorch example
# (sdk/python/examples/pytorch_ppo.py) runs under Debian's python3-torch
# (CPU; CUDA when a node has it), which also brings python3-numpy for the
# Python env client. Installed when missing; the tests fail instead of
# skipping when TRAINYARD_REQUIRE_TORCH is set.
export TRAINYARD_REQUIRE_TORCH := 1

TEST_DEPS += python-torch
BENCH_DEPS += python-torch

.PHONY: python-torch

python-torch:
	@if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then :; else \
		echo "installing python3-torch for the Python trainer example"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-torch; \
	fi
