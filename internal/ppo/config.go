package ppo

import (
	"fmt"
	"math"

	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/pendulum"
	"github.com/trainyard/trainyard/sdk/go/envs/spread"
)

// Config holds PPO's hyper-parameters. It is saved in every checkpoint, and
// a resumed run takes it from there. Workers changes the order in which
// per-sample gradients are summed, so runs are bit-reproducible for a fixed
// Seed, Workers and VecEnv size.
type Config struct {
	Seed uint64 `json:"seed"`
	// NumSteps is the rollout length per env per iteration; one iteration
	// collects NumSteps × NumEnvs transitions.
	NumSteps int `json:"num_steps"`
	// MinibatchSize splits a rollout into minibatches (the last takes the
	// remainder); Epochs passes are made over the rollout per iteration.
	MinibatchSize int `json:"minibatch_size"`
	Epochs        int `json:"epochs"`

	Gamma  float64 `json:"gamma"`
	Lambda float64 `json:"gae_lambda"`

	LearningRate float64 `json:"learning_rate"`
	// AnnealSteps > 0 decays the learning rate and clip range linearly to
	// zero over that many environment steps.
	AnnealSteps int64   `json:"anneal_steps,omitempty"`
	ClipCoef    float64 `json:"clip_coef"`
	ValueCoef   float64 `json:"value_coef"`
	EntropyCoef float64 `json:"entropy_coef"`
	MaxGradNorm float64 `json:"max_grad_norm"`
	AdamEps     float64 `json:"adam_eps"`
	// TargetKL > 0 stops an iteration's epochs early once a minibatch's
	// approximate KL exceeds it.
	TargetKL float64 `json:"target_kl,omitempty"`

	// Hidden sizes of both the policy and the value MLP (tanh).
	Hidden []int `json:"hidden"`
	// InitLogStd is the initial log standard deviation of a Gaussian
	// policy (state-independent, learned).
	InitLogStd float64 `json:"init_log_std"`

	// NormalizeObs keeps running mean/variance of observations and feeds
	// the networks (obs-mean)/std clipped to ±ObsClip.
	NormalizeObs bool    `json:"normalize_obs"`
	ObsClip      float64 `json:"obs_clip"`
	// NormalizeReward scales rewards by the running std of the discounted
	// return (as SB3's VecNormalize), clipped to ±RewardClip.
	NormalizeReward bool    `json:"normalize_reward"`
	RewardClip      float64 `json:"reward_clip"`

	// Workers is how many goroutines compute a minibatch's gradient.
	Workers int `json:"workers"`
	// ReturnWindow is how many recent episodes Metrics.RecentReturnMean
	// averages.
	ReturnWindow int `json:"return_window"`
}

// The defaults below are what a run gets unless its spec overrides them
// (internal/training: Spec.PPOConfig; docs/training.md "PPO defaults").
// TestLearnDefaults (internal/training) trains CartPole-v1 and Pendulum-v1
// with them, 8 envs as a run's spec defaults to, and checks that every seed
// reaches the run's target criterion (the mean of the last 100 training
// episodes) within the step budget.
//
// Reward normalisation is on everywhere: without it the value net regresses
// raw discounted returns (≈ 1/(1-γ) = 50 on CartPole once episodes last),
// which a tanh MLP reaches only by saturating its hidden units. In a stretch
// where every episode survives, the targets are all ≈ 50, the value net
// becomes a constant (explained variance 0), and when episodes fail again it
// cannot tell states apart for dozens of iterations: the advantages are
// noise, normalised to unit scale, and the policy unlearns (CartPole seed 0
// fell from 260 to 117 and, with the learning rate annealed to zero by
// 100k steps, stopped at 362). Scaled rewards keep value targets O(1).

// DefaultConfig is the fallback for envs without a tuned config (CleanRL's
// PPO defaults with 2 workers, plus reward normalisation, since an unknown
// env's reward scale is unknown).
func DefaultConfig() Config {
	return Config{
		NumSteps: 128, MinibatchSize: 128, Epochs: 4,
		Gamma: 0.99, Lambda: 0.95,
		LearningRate: 2.5e-4, ClipCoef: 0.2, ValueCoef: 0.5, EntropyCoef: 0.01,
		MaxGradNorm: 0.5, AdamEps: 1e-5,
		Hidden:       []int{64, 64},
		NormalizeObs: true, ObsClip: 10, NormalizeReward: true, RewardClip: 10,
		Workers: 2, ReturnWindow: 100,
	}
}

// CartPoleConfig is tuned for CartPole-v1 with 8 envs (after the
// rl-baselines3-zoo hyper-parameters: short rollouts, λ 0.8, γ 0.98, many
// epochs, no entropy bonus, annealed learning rate and clip range), with
// observation and reward normalisation.
func CartPoleConfig() Config {
	c := DefaultConfig()
	c.NumSteps, c.MinibatchSize, c.Epochs = 32, 256, 20
	c.Gamma, c.Lambda = 0.98, 0.8
	c.LearningRate, c.AnnealSteps = 1e-3, 100_000
	c.EntropyCoef = 0
	return c
}

// PendulumConfig is tuned for Pendulum-v1 with 8 envs: rl-baselines3-zoo's
// γ 0.9, λ 0.95, 10 epochs and 4096-step rollouts (its 4 envs × 1024), with
// observation and reward normalisation, but a 3e-4 learning rate in place
// of its 1e-3 and state-dependent exploration: at 1e-3 the learned log-std
// shrinks faster than the policy improves and some seeds (2 of seeds 0..9)
// settle, near-deterministic, around −500.
func PendulumConfig() Config {
	c := DefaultConfig()
	c.NumSteps, c.MinibatchSize, c.Epochs = 512, 256, 10
	c.Gamma, c.Lambda = 0.9, 0.95
	c.LearningRate = 3e-4
	c.EntropyCoef = 0
	return c
}

// SpreadConfig is tuned for LandmarkSpread-v0 with parameter sharing:
// its episodes are 25 steps, so γ 0.95; a 1e-3 learning rate, 10 epochs
// and 512-sample minibatches reach the defaults' return in about a third
// of their env steps (TestLearnSpread).
func SpreadConfig() Config {
	c := DefaultConfig()
	c.MinibatchSize, c.Epochs = 512, 10
	c.Gamma, c.LearningRate = 0.95, 1e-3
	return c
}

// ConfigFor returns the tuned config for a known environment name, else
// DefaultConfig.
func ConfigFor(env string) Config {
	switch env {
	case cartpole.Name:
		return CartPoleConfig()
	case pendulum.Name:
		return PendulumConfig()
	case spread.Name:
		return SpreadConfig()
	}
	return DefaultConfig()
}

func (c Config) validate() error {
	// Every float must be finite: a checkpoint stores the config as JSON.
	for name, v := range map[string]float64{
		"gamma": c.Gamma, "gae_lambda": c.Lambda, "learning_rate": c.LearningRate,
		"clip_coef": c.ClipCoef, "value_coef": c.ValueCoef, "entropy_coef": c.EntropyCoef,
		"max_grad_norm": c.MaxGradNorm, "adam_eps": c.AdamEps, "target_kl": c.TargetKL,
		"init_log_std": c.InitLogStd, "obs_clip": c.ObsClip, "reward_clip": c.RewardClip,
	} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s is %v", name, v)
		}
	}
	switch {
	case c.NumSteps < 1:
		return fmt.Errorf("num_steps %d < 1", c.NumSteps)
	case c.MinibatchSize < 1:
		return fmt.Errorf("minibatch_size %d < 1", c.MinibatchSize)
	case c.Epochs < 1:
		return fmt.Errorf("epochs %d < 1", c.Epochs)
	case !(c.Gamma >= 0 && c.Gamma <= 1):
		return fmt.Errorf("gamma %v outside [0,1]", c.Gamma)
	case !(c.Lambda >= 0 && c.Lambda <= 1):
		return fmt.Errorf("gae_lambda %v outside [0,1]", c.Lambda)
	case !(c.LearningRate > 0):
		return fmt.Errorf("learning_rate %v ≤ 0", c.LearningRate)
	case !(c.ClipCoef > 0):
		return fmt.Errorf("clip_coef %v ≤ 0", c.ClipCoef)
	case c.AnnealSteps < 0:
		return fmt.Errorf("anneal_steps %d < 0", c.AnnealSteps)
	case !(c.AdamEps > 0):
		return fmt.Errorf("adam_eps %v ≤ 0", c.AdamEps)
	case c.Workers < 1:
		return fmt.Errorf("workers %d < 1", c.Workers)
	case c.ReturnWindow < 1:
		return fmt.Errorf("return_window %d < 1", c.ReturnWindow)
	case c.NormalizeObs && !(c.ObsClip > 0):
		return fmt.Errorf("obs_clip %v ≤ 0", c.ObsClip)
	case c.NormalizeReward && !(c.RewardClip > 0):
		return fmt.Errorf("reward_clip %v ≤ 0", c.RewardClip)
	}
	for _, h := range c.Hidden {
		if h < 1 || h > maxHidden {
			return fmt.Errorf("hidden size %d outside [1,%d]", h, maxHidden)
		}
	}
	// Bounds that keep a corrupt or hostile config (say, from a checkpoint)
	// from asking for absurd allocations.
	switch {
	case len(c.Hidden) > maxLayers:
		return fmt.Errorf("%d hidden layers > %d", len(c.Hidden), maxLayers)
	case c.NumSteps > maxSteps:
		return fmt.Errorf("num_steps %d > %d", c.NumSteps, maxSteps)
	case c.Workers > maxWorkers:
		return fmt.Errorf("workers %d > %d", c.Workers, maxWorkers)
	case c.ReturnWindow > maxWindow:
		return fmt.Errorf("return_window %d > %d", c.ReturnWindow, maxWindow)
	}
	return nil
}

const (
	maxHidden  = 4096
	maxLayers  = 16
	maxSteps   = 1 << 20
	maxWorkers = 256
	maxWindow  = 1 << 20
	// maxRollout bounds NumSteps × NumEnvs × widest row (checked in build).
	maxRollout = 1 << 24
)

// Validate reports a config the learner would refuse, before any env exists.
func (c Config) Validate() error { return c.validate() }
