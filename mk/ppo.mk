# Built-in PPO learner (internal/ppo, internal/nn, sdk/go/envs/...).
# The learning tests are compiled out under -race (minutes with the race
# detector), so `make test` runs them here first, without -race, on one or
# two seeds: internal/ppo's CartPole-v1 to 475 in-process and from 2
# simulated rollout workers' fragments (seeds 1, 2) and Pendulum-v1 to -200;
# internal/training's TestLearnDefaults (CartPole-v1 with a run's default
# hyper-parameters and target criterion, seed 0; Pendulum-v1 in make learn) and CartPole-v1 solved by
# evaluation within 50k env steps (seeds 0, 1); the reinforce algorithm more
# than triples a random CartPole policy's return (seeds 0..2). `make learn` (mk/test.mk)
# runs every seed, 0..9. Also internal/ppo's exact-resume check, compiled
# out under -race (64 s there; bit-for-bit PPO, no goroutines of its own).
TEST_DEPS += ppo-learn

.PHONY: ppo-learn ppo-bench

ppo-learn: testtimes
	@$(call gotest,ppo-learn,-count=1 -run '^(TestLearn|TestResumeIsExactOnEveryEnvKind$$)' -timeout 15m ./internal/ppo/ ./internal/training/ ./internal/training/reinforce/ ./internal/dqn/)

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
