package ppo

import (
	"fmt"
	"math"

	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/pendulum"
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

// DefaultConfig is a general starting point (CleanRL's PPO defaults with
// 2 workers).
func DefaultConfig() Config {
	return Config{
		NumSteps: 128, MinibatchSize: 128, Epochs: 4,
		Gamma: 0.99, Lambda: 0.95,
		LearningRate: 2.5e-4, ClipCoef: 0.2, ValueCoef: 0.5, EntropyCoef: 0.01,
		MaxGradNorm: 0.5, AdamEps: 1e-5,
		Hidden:       []int{64, 64},
		NormalizeObs: true, ObsClip: 10, RewardClip: 10,
		Workers: 2, ReturnWindow: 100,
	}
}

// CartPoleConfig is tuned for CartPole-v1 with 8 envs (after the
// rl-baselines3-zoo hyper-parameters: short rollouts, λ 0.8, γ 0.98, many
// epochs, no entropy bonus, annealed learning rate and clip range).
func CartPoleConfig() Config {
	c := DefaultConfig()
	c.NumSteps, c.MinibatchSize, c.Epochs = 32, 256, 20
	c.Gamma, c.Lambda = 0.98, 0.8
	c.LearningRate, c.AnnealSteps = 1e-3, 100_000
	c.EntropyCoef = 0
	return c
}

// PendulumConfig is tuned for Pendulum-v1 with 4 envs (rl-baselines3-zoo's
// γ 0.9, λ 0.95, 10 epochs, 1e-3 learning rate, plus observation and reward
// normalisation in place of its state-dependent exploration).
func PendulumConfig() Config {
	c := DefaultConfig()
	c.NumSteps, c.MinibatchSize, c.Epochs = 1024, 256, 10
	c.Gamma, c.Lambda = 0.9, 0.95
	c.LearningRate = 1e-3
	c.EntropyCoef = 0
	c.NormalizeReward = true
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
