package dqn

import (
	"errors"
	"io"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Name is what a run spec's algorithm says.
const Name = "dqn"

func init() {
	training.RegisterAlgorithm(training.Algorithm{
		Name:  Name,
		Doc:   "DQN on the built-in learner: replay buffer, target network, double Q, epsilon-greedy; its return is a greedy evaluation (discrete actions)",
		Shape: training.ShapeSegments,
		Validate: func(s training.Spec, bad func(field, format string, a ...any)) {
			training.LearnerFields(s, Name, bad)
		},
		Learner: Factory{},
	})
}

// Factory is DQN as the platform's learner.Factory.
type Factory struct{}

var _ learner.Factory = Factory{}

var _ learner.SpaceChecker = Factory{}

// CheckSpaces refuses what build would: DQN needs box observations and
// discrete actions.
func (Factory) CheckSpaces(obs, act envs.Space) error {
	if err := checkSpaces(obs, act); err != nil {
		return &learner.FieldError{Field: "env", Reason: err.Error()}
	}
	return nil
}

// Tuned is a run's configuration on envName: the tuned defaults
// (ConfigFor), the knobs, then the hyper-parameters.
func (Factory) Tuned(envName string, k learner.Knobs) (Config, error) {
	c := ConfigFor(envName)
	c.Seed = k.Seed
	if k.EpisodeLength > 0 {
		c.NumSteps = k.EpisodeLength
	}
	if k.BatchSize > 0 {
		c.BatchSize = k.BatchSize
	}
	if err := learner.Overlay(&c, k.Hyperparameters, "seed"); err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		var fe *learner.FieldError
		if errors.As(err, &fe) {
			return c, &learner.FieldError{Field: "hyperparameters." + fe.Field, Reason: fe.Reason}
		}
		return c, err
	}
	return c, nil
}

// Config is Tuned, for learner.Factory.
func (f Factory) Config(envName string, k learner.Knobs) (any, error) { return f.Tuned(envName, k) }

// New is a fresh learner on env.Train, evaluating on env.Open's envs.
func (f Factory) New(env learner.Env, k learner.Knobs) (learner.Learner, error) {
	c, err := f.Tuned(env.Train.Spec().Name, k)
	if err != nil {
		return nil, err
	}
	l, err := New(env.Train, env.Open, c)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Restore continues a checkpoint on env.Train (its config is the saved one).
func (Factory) Restore(r io.Reader, env learner.Env) (learner.Learner, error) {
	l, err := Restore(r, env.Train, env.Open)
	if err != nil {
		return nil, err
	}
	return l, nil
}

var _ learner.Learner = (*Learner)(nil)
