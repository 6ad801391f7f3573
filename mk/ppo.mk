# Built-in PPO learner (internal/ppo, internal/nn, sdk/go/envs/...).
# The learning tests (CartPole-v1 to 475 in-process and from 2 simulated
# rollout workers' fragments, Pendulum-v1 to -200; internal/training's
# TestLearnDefaults: both envs with a run's default hyper-parameters and
# target criterion on seeds 0..4, and CartPole-v1 solved by evaluation within
# 50k env steps on seeds 0..9) take a few minutes without the race
# detector and are compiled out under -race, so `make test` runs them here
# first, without -race. ppo-learn-seeds runs the defaults on seeds 0..9.
TEST_DEPS += ppo-learn

.PHONY: ppo-learn ppo-learn-seeds ppo-bench

ppo-learn:
	$(GO) test -count=1 -run '^TestLearn' -timeout 10m ./internal/ppo/
	$(GO) test -count=1 -run '^TestLearnDefaults' -timeout 15m ./internal/training/

ppo-learn-seeds:
	TRAINYARD_LEARN_SEEDS=0-9 $(GO) test -count=1 -v -run '^TestLearnDefaults$$' -timeout 30m ./internal/training/

# Rollout throughput, time to CartPole 475, env and network kernels (the
# WASM rollout benchmarks need the compiled plugins: `plugins`).
ppo-bench: plugins
	$(GO) test -run '^$$' -bench . -benchmem ./internal/ppo/ ./internal/nn/
	cd sdk/go && $(GO) test -run '^$$' -bench . -benchmem ./envs/...

# Checkpoint and env-snapshot parsers, 30 s each.
.PHONY: ppo-fuzz
ppo-fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzRestore$$' -fuzztime 30s ./internal/ppo/
	cd sdk/go && $(GO) test -run '^$$' -fuzz '^FuzzRestoreSnapshot$$' -fuzztime 30s ./envs/native/
