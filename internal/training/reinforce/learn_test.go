//go:build !race

// Compiled out under -race like the other learning checks (the learner
// has no goroutines of its own here); the norace run and ppo-learn run it.

package reinforce

import (
	"context"
	"testing"

	"github.com/trainyard/trainyard/internal/ppo"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/native"
)

// TestLearnCartPole is the sanity baseline: a run spec naming
// reinforce, through the registry (defaults, validation, the learner's
// configuration), more than triples a random policy's CartPole return
// (about 22) within 60 iterations, on seeds 0..2.
func TestLearnCartPole(t *testing.T) {
	for seed := range uint64(3) {
		spec := training.Spec{Cluster: "test", Env: cartpole.Name, Algorithm: Name, Seed: seed}.WithDefaults()
		if err := spec.Validate(); err != nil {
			t.Fatal(err)
		}
		cfg, err := ppoConfig(spec, cartpole.Name)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Epochs != 1 || cfg.Lambda != 1 || cfg.MinibatchSize < cfg.NumSteps*spec.NumEnvs() {
			t.Fatalf("not REINFORCE's configuration: %+v", cfg)
		}
		venv, err := native.New(cartpole.Name, spec.NumEnvs())
		if err != nil {
			t.Fatal(err)
		}
		l, err := ppo.New(venv, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var m ppo.Metrics
		for range 60 {
			if m, err = l.Iterate(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("seed %d: mean return %.1f after %d env steps", seed, m.RecentReturnMean, m.Timesteps)
		if m.RecentReturnMean < 75 {
			t.Errorf("seed %d: mean return %.1f after 60 iterations; a random policy gets about 22", seed, m.RecentReturnMean)
		}
	}
}
