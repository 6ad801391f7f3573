//go:build !race

package ppo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/native"
)

// TestLearnCartPoleFromFragments is the distributed mode's learning
// target: a trainer that never steps an env learns CartPole-v1 from the
// fragments of 2 simulated rollout workers (4 envs each, their own seeds,
// weights and fragments through their byte encodings) until a
// deterministic evaluation over 20 episodes averages ≥ 475, within the
// same 100k env steps the in-process learner gets.
func TestLearnCartPoleFromFragments(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			cfg := ConfigFor(cartpole.Name)
			cfg.Seed = seed
			s := newSim(t, cartpole.Name, cfg, 2, 4)
			evalEnv, err := native.New(cartpole.Name, 10)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var last Metrics
			for last.Timesteps < 100_000 {
				last = s.iterate(t)
				if last.RecentReturnMean < 300 && last.Iteration%5 != 0 {
					continue
				}
				ev, err := s.trainer.Evaluate(context.Background(), evalEnv, 1_000_003, 20)
				if err != nil {
					t.Fatal(err)
				}
				if ev.ReturnMean >= 475 {
					t.Logf("seed %d: evaluation mean %.1f (min %.1f) after %d env steps, %d iterations, %.1f s wall",
						seed, ev.ReturnMean, ev.ReturnMin, last.Timesteps, last.Iteration, time.Since(start).Seconds())
					return
				}
			}
			t.Fatalf("seed %d: no evaluation reached 475 within 100k env steps (last: %+v)", seed, last)
		})
	}
}
