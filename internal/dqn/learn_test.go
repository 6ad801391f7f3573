//go:build !race

// The learning check trains to SB3 zoo's criterion and takes tens of
// seconds without the race detector, so `go test -race` skips it; `make
// test` runs seed 0 without -race (mk/ppo.mk, ppo-learn) and `make learn`
// the seeds in TRAINYARD_LEARN_SEEDS.

package dqn

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/native"
)

// learnSeeds reads TRAINYARD_LEARN_SEEDS ("0-4", "3"), as internal/
// training's learning tests do; default seed 1 (seed 0 happens to solve
// after one training phase, so it checks less).
func learnSeeds(t *testing.T) []uint64 {
	v := os.Getenv("TRAINYARD_LEARN_SEEDS")
	if v == "" {
		return []uint64{1}
	}
	lo, hi, ok := strings.Cut(v, "-")
	if !ok {
		hi = lo
	}
	a, err1 := strconv.ParseUint(lo, 10, 64)
	b, err2 := strconv.ParseUint(hi, 10, 64)
	if err1 != nil || err2 != nil || b < a {
		t.Fatalf("TRAINYARD_LEARN_SEEDS=%q: want N or N-M", v)
	}
	var seeds []uint64
	for s := a; s <= b; s++ {
		seeds = append(seeds, s)
	}
	return seeds
}

// TestLearnCartPole is issue 45's DQN target, the way SB3's zoo reports
// DQN: a greedy evaluation of 100 episodes averages ≥ 475 within 100,000
// training steps, with a run's 8 envs and the tuned CartPole config.
func TestLearnCartPole(t *testing.T) {
	for _, seed := range learnSeeds(t) {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			venv, err := native.New(cartpole.Name, 8)
			if err != nil {
				t.Fatal(err)
			}
			l, err := Factory{}.New(learner.Env{Train: venv, Open: openNative(cartpole.Name)}, learner.Knobs{Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			best := 0.0
			for {
				m, err := l.Iterate(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if ev, ok := m.Values["eval_return_mean"]; ok {
					best = max(best, ev)
					t.Logf("%6d steps: greedy %.1f over %d episodes, training %.1f, %s", m.Timesteps, ev, m.RecentEpisodes, m.Values["train_return_mean"], m.Brief())
				}
				if m.RecentEpisodes >= 100 && m.RecentReturnMean >= 475 {
					t.Logf("seed %d: solved at %d steps", seed, m.Timesteps)
					return
				}
				if m.Timesteps >= 100_000 {
					t.Fatalf("seed %d: best greedy mean %.1f within %d steps, want ≥ 475", seed, best, m.Timesteps)
				}
			}
		})
	}
}
