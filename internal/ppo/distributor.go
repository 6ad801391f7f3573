package ppo

import (
	"context"
	"fmt"
	"io"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Factory as a learner.Distributor: PPO's trainer and actors (this file's
// adapters over NewTrainer, NewActor, Learn and Collect), multi-agent
// PPO's on a multi-agent env (multiagent_distributed.go).

var _ learner.Distributor = Factory{}

// NewTrainer is a fresh trainer for numEnvs env slots of spec.
func (f Factory) NewTrainer(spec envs.Spec, numEnvs int, k learner.Knobs) (learner.Trainer, error) {
	if spec.MultiAgent() {
		return f.newMultiTrainer(spec, numEnvs, k)
	}
	cfg, err := f.Tuned(spec.Name, k)
	if err != nil {
		return nil, err
	}
	l, err := NewTrainer(spec, numEnvs, cfg)
	if err != nil {
		return nil, err
	}
	return trainer{generic{l}}, nil
}

// RestoreTrainer continues a trainer's checkpoint.
func (f Factory) RestoreTrainer(r io.Reader, spec envs.Spec, numEnvs int) (learner.Trainer, error) {
	if spec.MultiAgent() {
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("ppo: restore: read: %w", err)
		}
		return restoreMultiTrainer(data, spec, numEnvs)
	}
	l, err := Restore(r, SpecOnly(spec, numEnvs))
	if err != nil {
		return nil, err
	}
	return trainer{generic{l}}, nil
}

// NewActor is a rollout worker on env, seeded with k.Seed.
func (f Factory) NewActor(env envs.VecEnv, k learner.Knobs) (learner.Actor, error) {
	if env.Spec().MultiAgent() {
		return f.newMultiActor(env, k)
	}
	cfg, err := f.Tuned(env.Spec().Name, k)
	if err != nil {
		return nil, err
	}
	l, err := NewActor(env, cfg)
	if err != nil {
		return nil, err
	}
	return actor{l}, nil
}

// trainer is a single-policy Learner made with NewTrainer.
type trainer struct{ generic }

func (t trainer) Weights() ([]byte, error) { return t.Learner.Weights("").Encode() }

func (t trainer) Learn(ctx context.Context, raw [][]byte) (learner.Metrics, error) {
	frags := make([]*Fragment, len(raw))
	for i, b := range raw {
		f, err := DecodeFragment(b)
		if err != nil {
			return learner.Metrics{}, fmt.Errorf("ppo: fragment %d: %w", i, err)
		}
		frags[i] = f
	}
	m, err := t.Learner.Learn(ctx, frags)
	return m.Generic(), err
}

// actor is a single-policy Learner made with NewActor.
type actor struct{ l *Learner }

func (a actor) Collect(ctx context.Context, raw []byte, worker int, node string) ([]byte, int64, error) {
	w, err := DecodeWeights(raw)
	if err != nil {
		return nil, 0, err
	}
	f, err := a.l.Collect(ctx, w, worker, node)
	if err != nil {
		return nil, 0, err
	}
	b, err := f.Encode()
	return b, int64(f.NumEnvs * f.NumSteps), err
}
