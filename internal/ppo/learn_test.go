//go:build !race

// The learning tests train to the targets of issue 6 and take seconds
// without the race detector but minutes with it, so `go test -race` skips
// them; `make test` runs them first without -race (mk/ppo.mk, target
// ppo-learn). The race run still covers the same code through the short
// tests in learner_test.go.

package ppo

import (
	"fmt"
	"testing"

	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/pendulum"
)

// TestLearnCartPoleTo475 is issue 6's CartPole-v1 target: a deterministic
// evaluation over 20 episodes averages ≥ 475 within 100k env steps (the
// budget rl-baselines3-zoo gives PPO on CartPole-v1).
func TestLearnCartPoleTo475(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			learn(t, learnCase{env: cartpole.Name, numEnvs: 8, seed: seed, target: 475, budget: 100_000,
				evalEnvs: 10, evalEpisodes: 20, evalFrom: 300})
		})
	}
}

// TestLearnPendulumToMinus200 is issue 6's Pendulum target. Gymnasium sets
// no reward threshold for Pendulum-v1; rl-baselines3-zoo's benchmark
// (benchmark.md, deterministic evaluation) reports PPO −172 ± 104 after
// 100k steps, TRPO −175, SAC −157 and TD3 −152, so a mean ≥ −200 over 100
// deterministic episodes is in the range the literature calls solved.
// Budget: 250k env steps.
func TestLearnPendulumToMinus200(t *testing.T) {
	learn(t, learnCase{env: pendulum.Name, numEnvs: 4, seed: 1, target: -200, budget: 250_000,
		evalEnvs: 20, evalEpisodes: 100, evalFrom: -400})
}
