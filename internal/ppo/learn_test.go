//go:build !race

// The learning tests train to the targets of issue 6 and take seconds
// without the race detector but minutes with it, so `go test -race` skips
// them; `make test` runs them first without -race (mk/ppo.mk, target
// ppo-learn). The race run still covers the same code through the short
// tests in learner_test.go.

package ppo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/envs/cartpole"
	"github.com/trainyard/trainyard/internal/envs/native"
	"github.com/trainyard/trainyard/internal/envs/pendulum"
)

// learnCase trains until a deterministic evaluation of evalEpisodes
// episodes (on evalEnvs instances reset with evalSeed, never trained on)
// reaches target, or fails once the step budget is spent.
type learnCase struct {
	env          string
	numEnvs      int
	seed         uint64
	target       float64
	budget       int64 // env steps
	evalEnvs     int
	evalEpisodes int
	// evalFrom is the training-window mean above which every iteration is
	// evaluated (evaluation is cheap but not free); below it, every 5th.
	evalFrom float64
}

// learn returns the env steps used and the passing evaluation.
func learn(t *testing.T, tc learnCase) (int64, EvalResult) {
	t.Helper()
	cfg := ConfigFor(tc.env)
	cfg.Seed = tc.seed
	env, err := native.New(tc.env, tc.numEnvs)
	if err != nil {
		t.Fatal(err)
	}
	evalEnv, err := native.New(tc.env, tc.evalEnvs)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(env, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	var last Metrics
	for last.Timesteps < tc.budget {
		if last, err = l.Iterate(ctx); err != nil {
			t.Fatal(err)
		}
		if last.RecentReturnMean < tc.evalFrom && last.Iteration%5 != 0 {
			continue
		}
		ev, err := l.Evaluate(ctx, evalEnv, 1_000_003, tc.evalEpisodes)
		if err != nil {
			t.Fatal(err)
		}
		if ev.ReturnMean >= tc.target {
			t.Logf("%s seed %d: evaluation mean %.1f (min %.1f) over %d episodes after %d env steps, %d iterations, %.1f s wall",
				tc.env, tc.seed, ev.ReturnMean, ev.ReturnMin, ev.Episodes, last.Timesteps, last.Iteration, time.Since(start).Seconds())
			return last.Timesteps, ev
		}
	}
	t.Fatalf("%s seed %d: no evaluation reached %.0f within %d env steps (last iteration: %+v)", tc.env, tc.seed, tc.target, tc.budget, last)
	return 0, EvalResult{}
}

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
