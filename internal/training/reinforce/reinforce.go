// Package reinforce is the algorithm "reinforce": REINFORCE with a learned
// value baseline (vanilla policy gradient) on the built-in learner. Each
// iteration takes one gradient step on the whole batch of returns, with
// no clipping and no reuse of old samples: the baseline PPO is measured
// against, and a sanity check that a run's env and rewards can be learnt
// at all. It is also the worked example of adding an algorithm
// (docs/architecture.md): this package and one import line in
// cmd/trainyard.
package reinforce

import (
	"math"

	"github.com/trainyard/trainyard/internal/ppo"
	"github.com/trainyard/trainyard/internal/training"
)

// Name is what a run spec's algorithm says.
const Name = "reinforce"

func init() {
	training.RegisterAlgorithm(training.Algorithm{
		Name:  Name,
		Doc:   "REINFORCE with a value baseline on the built-in learner: one unclipped gradient step per iteration (a baseline for ppo)",
		Shape: training.ShapeSegments,
		Validate: func(s training.Spec, bad func(field, format string, a ...any)) {
			training.LearnerFields(s, Name, bad)
		},
		Learner: ppo.Factory{Adjust: Configure},
	})
}

// Configure turns the built-in PPO learner into REINFORCE with a baseline.
// At the first and only gradient step of an iteration the probability
// ratio is exactly 1, so PPO's surrogate has the policy gradient's
// gradient, and the clip never binds; λ = 1 makes the advantages Monte
// Carlo returns (bootstrapped only where a rollout cuts an episode) less
// the learned value. The run's own knobs and hyper-parameters still
// apply on top (a batch_size below the batch brings minibatches back).
func Configure(c *ppo.Config) {
	c.Epochs = 1
	c.MinibatchSize = math.MaxInt32 // one minibatch: the whole rollout
	c.Lambda = 1
	c.ClipCoef = 1e9
	c.TargetKL = 0
	// One step per batch where PPO took Epochs × minibatches: longer
	// rollouts, so each step sees whole episodes.
	c.NumSteps = max(c.NumSteps, 128)
}
