package dqn

import (
	"fmt"
	"math"

	"github.com/trainyard/trainyard/internal/learner"

	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
)

// Config is DQN's hyper-parameters, by the JSON names a run's
// hyperparameters set. It is saved in every checkpoint; a resumed run
// takes it from there. Step counts are env steps over all the run's envs
// unless they say otherwise.
type Config struct {
	Seed uint64 `json:"seed"`
	// NumSteps is env steps per env per iteration: an iteration collects
	// NumSteps × NumEnvs transitions and trains on them as it goes.
	NumSteps int `json:"num_steps"`

	LearningRate float64 `json:"learning_rate"`
	Gamma        float64 `json:"gamma"`
	// BufferSize transitions are kept; the oldest go first.
	BufferSize int `json:"buffer_size"`
	// LearningStarts env steps act at random and train nothing.
	LearningStarts int64 `json:"learning_starts"`
	BatchSize      int   `json:"batch_size"`
	// Every TrainFreq env steps, GradientSteps minibatch updates.
	TrainFreq     int `json:"train_freq"`
	GradientSteps int `json:"gradient_steps"`
	// TargetUpdateInterval gradient steps between copies of the online
	// network into the target network.
	TargetUpdateInterval int `json:"target_update_interval"`
	// Epsilon-greedy exploration: InitialEps decays linearly to FinalEps
	// over ExplorationSteps env steps.
	InitialEps       float64 `json:"exploration_initial_eps"`
	FinalEps         float64 `json:"exploration_final_eps"`
	ExplorationSteps int64   `json:"exploration_steps"`
	// DoubleQ picks the next action with the online network and values it
	// with the target network (van Hasselt et al. 2016).
	DoubleQ     bool    `json:"double_q"`
	MaxGradNorm float64 `json:"max_grad_norm"`
	AdamEps     float64 `json:"adam_eps"`
	// Hidden sizes of the Q network (tanh).
	Hidden []int `json:"hidden"`

	// Every EvalEvery iterations the greedy policy plays EvalEpisodes
	// episodes on EvalEnvs fresh envs; their mean is the run's return
	// (targets, best checkpoints, sweeps), as SB3's zoo reports DQN.
	// 0 reports the training episodes instead.
	EvalEvery    int `json:"eval_every"`
	EvalEpisodes int `json:"eval_episodes"`
	EvalEnvs     int `json:"eval_envs"`
	// ReturnWindow is how many training episodes train_return_mean
	// averages.
	ReturnWindow int `json:"return_window"`
}

// DefaultConfig is the fallback for envs without a tuned config.
func DefaultConfig() Config {
	return Config{
		NumSteps: 128, LearningRate: 1e-4, Gamma: 0.99,
		BufferSize: 100_000, LearningStarts: 10_000, BatchSize: 64,
		TrainFreq: 4, GradientSteps: 1, TargetUpdateInterval: 1000,
		InitialEps: 1, FinalEps: 0.05, ExplorationSteps: 50_000,
		DoubleQ: true, MaxGradNorm: 10, AdamEps: 1e-8,
		Hidden:    []int{64, 64},
		EvalEvery: 10, EvalEpisodes: 100, EvalEnvs: 10,
		ReturnWindow: 100,
	}
}

// CartPoleConfig follows rl-baselines3-zoo's DQN on CartPole-v1 (batches
// of 64 from a 100k buffer after 1,000 random steps, 128 gradient steps
// every 256 env steps, the target synced between them, ε from 1 to 0.04
// over 8,000 steps, learning rate 2.3e-3, γ 0.99) on a smaller tanh
// network than its 256×256 ReLU one, evaluated greedily every 2 iterations
// (2,048 env steps with 8 envs).
func CartPoleConfig() Config {
	c := DefaultConfig()
	c.LearningRate, c.LearningStarts = 2.3e-3, 1000
	c.TrainFreq, c.GradientSteps, c.TargetUpdateInterval = 256, 128, 128
	c.FinalEps, c.ExplorationSteps = 0.04, 8000
	c.EvalEvery = 2
	return c
}

// ConfigFor returns the tuned config for a known env name, else
// DefaultConfig.
func ConfigFor(env string) Config {
	if env == cartpole.Name {
		return CartPoleConfig()
	}
	return DefaultConfig()
}

// Bounds that keep a corrupt or hostile config (say, from a checkpoint)
// from asking for absurd allocations.
const (
	maxHidden  = 4096
	maxLayers  = 16
	maxSteps   = 1 << 20
	maxBuffer  = 10_000_000
	maxBatch   = 1 << 16
	maxWindow  = 1 << 20
	maxEvalEnv = 1024
	// maxReplayValues bounds a full replay buffer: 4 GiB of float32.
	maxReplayValues = 1 << 30
)

// Validate reports a config the learner would refuse, naming its JSON
// field.
func (c Config) Validate() error {
	// Every float must be finite: a checkpoint stores the config as JSON.
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"learning_rate", c.LearningRate}, {"gamma", c.Gamma}, {"exploration_initial_eps", c.InitialEps},
		{"exploration_final_eps", c.FinalEps}, {"max_grad_norm", c.MaxGradNorm}, {"adam_eps", c.AdamEps},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fieldError(f.name, "is %v, want a finite number", f.v)
		}
	}
	switch {
	case c.NumSteps < 1 || c.NumSteps > maxSteps:
		return fieldError("num_steps", "%d outside [1,%d]", c.NumSteps, maxSteps)
	case !(c.LearningRate > 0):
		return fieldError("learning_rate", "%v, want > 0", c.LearningRate)
	case !(c.Gamma >= 0 && c.Gamma <= 1):
		return fieldError("gamma", "%v outside [0,1]", c.Gamma)
	case c.BufferSize < 1 || c.BufferSize > maxBuffer:
		return fieldError("buffer_size", "%d outside [1,%d]", c.BufferSize, maxBuffer)
	case c.BatchSize < 1 || c.BatchSize > maxBatch:
		return fieldError("batch_size", "%d outside [1,%d]", c.BatchSize, maxBatch)
	case c.LearningStarts < 0:
		return fieldError("learning_starts", "%d, want ≥ 0", c.LearningStarts)
	case c.TrainFreq < 1:
		return fieldError("train_freq", "%d, want ≥ 1", c.TrainFreq)
	case c.GradientSteps < 0 || c.GradientSteps > maxSteps:
		return fieldError("gradient_steps", "%d outside [0,%d]", c.GradientSteps, maxSteps)
	case c.TargetUpdateInterval < 1:
		return fieldError("target_update_interval", "%d, want ≥ 1", c.TargetUpdateInterval)
	case !(c.InitialEps >= 0 && c.InitialEps <= 1):
		return fieldError("exploration_initial_eps", "%v outside [0,1]", c.InitialEps)
	case !(c.FinalEps >= 0 && c.FinalEps <= 1):
		return fieldError("exploration_final_eps", "%v outside [0,1]", c.FinalEps)
	case c.ExplorationSteps < 0:
		return fieldError("exploration_steps", "%d, want ≥ 0", c.ExplorationSteps)
	case c.MaxGradNorm < 0:
		return fieldError("max_grad_norm", "%v, want ≥ 0 (0: no clipping)", c.MaxGradNorm)
	case !(c.AdamEps > 0):
		return fieldError("adam_eps", "%v, want > 0", c.AdamEps)
	case len(c.Hidden) > maxLayers:
		return fieldError("hidden", "%d layers, at most %d", len(c.Hidden), maxLayers)
	case c.EvalEvery < 0:
		return fieldError("eval_every", "%d, want ≥ 0 (0: report training episodes)", c.EvalEvery)
	case c.EvalEvery > 0 && (c.EvalEpisodes < 1 || c.EvalEpisodes > maxWindow):
		return fieldError("eval_episodes", "%d outside [1,%d]", c.EvalEpisodes, maxWindow)
	case c.EvalEvery > 0 && (c.EvalEnvs < 1 || c.EvalEnvs > maxEvalEnv):
		return fieldError("eval_envs", "%d outside [1,%d]", c.EvalEnvs, maxEvalEnv)
	case c.ReturnWindow < 1 || c.ReturnWindow > maxWindow:
		return fieldError("return_window", "%d outside [1,%d]", c.ReturnWindow, maxWindow)
	}
	for _, h := range c.Hidden {
		if h < 1 || h > maxHidden {
			return fieldError("hidden", "layer size %d outside [1,%d]", h, maxHidden)
		}
	}
	return nil
}

// fieldError names the config field at fault by its JSON name (Factory
// puts it under hyperparameters).
func fieldError(field, format string, a ...any) error {
	return &learner.FieldError{Field: field, Reason: fmt.Sprintf(format, a...)}
}
