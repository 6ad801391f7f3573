package ppo

import (
	"context"
	"fmt"
	"io"

	"github.com/trainyard/trainyard/internal/scripted"
	"github.com/trainyard/trainyard/sdk/go/envs"

	"github.com/trainyard/trainyard/internal/learner"
)

// Factory is PPO as the platform's learner.Factory (training registers
// it as algorithm ppo; reinforce registers it with Adjust).
type Factory struct {
	// Adjust, when set, changes the env's tuned config before the run's
	// knobs and hyper-parameters, which still win.
	Adjust func(*Config)
}

var _ learner.Factory = Factory{}

// Tuned is a run's configuration on envName: the tuned defaults
// (ConfigFor), Adjust, the knobs, then the hyper-parameters.
func (f Factory) Tuned(envName string, k learner.Knobs) (Config, error) {
	c := ConfigFor(envName)
	if f.Adjust != nil {
		f.Adjust(&c)
	}
	c.Seed, c.Workers = k.Seed, k.Workers
	if k.EpisodeLength > 0 {
		c.NumSteps = k.EpisodeLength
	}
	if k.BatchSize > 0 {
		c.MinibatchSize = k.BatchSize
	}
	if err := learner.Overlay(&c, k.Hyperparameters, "seed", "workers"); err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, &learner.FieldError{Field: "hyperparameters", Reason: err.Error()}
	}
	return c, nil
}

// Config is Tuned, for learner.Factory.
func (f Factory) Config(envName string, k learner.Knobs) (any, error) { return f.Tuned(envName, k) }

// New is a fresh learner on env.Train: multi-agent PPO on a multi-agent
// env (multiagent.go).
func (f Factory) New(env learner.Env, k learner.Knobs) (learner.Learner, error) {
	if env.Train != nil && env.Train.Spec().MultiAgent() {
		spec := env.Train.Spec()
		res, cfgs, err := f.multiAgent(spec, k)
		if err != nil {
			return nil, err
		}
		m, err := newMultiLearner(env.Train, res, cfgs, k.Seed, k.Imports)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	c, err := f.Tuned(env.Train.Spec().Name, k)
	if err != nil {
		return nil, err
	}
	l, err := New(env.Train, c)
	if err != nil {
		return nil, err
	}
	return l.Generic(), nil
}

// Restore continues a checkpoint on env.Train (its config is the saved one).
func (f Factory) Restore(r io.Reader, env learner.Env) (learner.Learner, error) {
	if env.Train != nil && env.Train.Spec().MultiAgent() {
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("ppo: restore: read: %w", err)
		}
		m, err := restoreMulti(data, env.Train)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	l, err := Restore(r, env.Train)
	if err != nil {
		return nil, err
	}
	return l.Generic(), nil
}

// multiAgent resolves a multi-agent run's policies on spec and configures
// each learned one.
func (f Factory) multiAgent(spec envs.Spec, k learner.Knobs) (learner.Resolved, []*Config, error) {
	res, err := k.MultiAgent.Resolve(spec.Agents)
	if err != nil {
		return res, nil, err
	}
	for i, p := range res.Policy {
		if p.Script != "" {
			if _, err := scripted.For(p.Script, spec.Name); err != nil {
				return res, nil, &learner.FieldError{Field: "policies." + res.Names[i] + ".script", Reason: err.Error()}
			}
		}
	}
	cfgs, err := multiConfigs(res, func(hp map[string]any) (Config, error) {
		kk := k
		kk.Hyperparameters = hp
		return f.Tuned(spec.Name, kk)
	}, k.Hyperparameters)
	return res, cfgs, err
}

// CheckEnv refuses, at submission, a run whose policies do not fit the
// env's agents (learner.EnvChecker).
func (f Factory) CheckEnv(spec envs.Spec, k learner.Knobs) error {
	if !spec.MultiAgent() {
		_, err := k.MultiAgent.Resolve(nil)
		return err
	}
	_, _, err := f.multiAgent(spec, k)
	return err
}

// Generic is l as a learner.Learner: the same learner, its metrics
// generic.
func (l *Learner) Generic() learner.Learner { return generic{l} }

type generic struct{ *Learner }

func (g generic) Iterate(ctx context.Context) (learner.Metrics, error) {
	m, err := g.Learner.Iterate(ctx)
	return m.Generic(), err
}

// Generic is m with PPO's own numbers by name.
func (m Metrics) Generic() learner.Metrics {
	return learner.Metrics{
		Iteration: m.Iteration, Timesteps: m.Timesteps,
		Episodes: m.Episodes, EpisodeReturnMean: m.EpisodeReturnMean, EpisodeReturnMin: m.EpisodeReturnMin,
		EpisodeReturnMax: m.EpisodeReturnMax, EpisodeLengthMean: m.EpisodeLengthMean,
		RecentReturnMean: m.RecentReturnMean, RecentEpisodes: m.RecentEpisodes,
		StepsPerSecond: m.StepsPerSecond, Rollouts: m.Rollouts,
		Values: map[string]float64{
			"rollout_steps_per_second": m.RolloutStepsPerSecond,
			"policy_loss":              m.PolicyLoss,
			"value_loss":               m.ValueLoss,
			"entropy":                  m.Entropy,
			"approx_kl":                m.ApproxKL,
			"clip_fraction":            m.ClipFraction,
			"explained_variance":       m.ExplainedVariance,
			"grad_norm":                m.GradNorm,
			"learning_rate":            m.LearningRate,
			"minibatches":              float64(m.Minibatches),
		},
	}
}
