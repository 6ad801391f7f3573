package ppo

import (
	"context"
	"testing"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/envs/multiagent"
	"github.com/trainyard/trainyard/sdk/go/envs/spread"
)

// maskWatch counts the actions its env's last observations masked.
type maskWatch struct {
	envs.VecEnv
	obs     []float32
	masked  int
	actions int
}

func (w *maskWatch) Reset(seed uint64, obs []float32) error {
	err := w.VecEnv.Reset(seed, obs)
	w.obs = append(w.obs[:0], obs...)
	return err
}

func (w *maskWatch) Step(actions, obs, rewards []float32, term, trunc []bool, fin []float32) error {
	spec := w.Spec()
	od := spec.Observation.Dim()
	for i, a := range actions {
		w.actions++
		if spec.Mask(w.obs[i*od : (i+1)*od])[int(a)] == 0 {
			w.masked++
		}
	}
	err := w.VecEnv.Step(actions, obs, rewards, term, trunc, fin)
	w.obs = append(w.obs[:0], obs...)
	return err
}

func spreadEnv(t testing.TB, games int) *maskWatch {
	t.Helper()
	env, err := multiagent.New(spread.Spec(), spread.Agents*games, func() multiagent.Env { return &spread.Env{} })
	if err != nil {
		t.Fatal(err)
	}
	return &maskWatch{VecEnv: env}
}

// PPO never samples, trains on or greedily picks a masked action (an
// agent on the grid's edge moving off it); without masks a fresh policy
// picks one in about a tenth of its steps.
func TestActionMaskIsNeverViolated(t *testing.T) {
	train := spreadEnv(t, 8)
	l, err := Factory{}.New(learner.Env{Train: train}, learner.Knobs{Seed: 3, Workers: 2,
		// Two episodes an iteration and two epochs: the update still runs
		// on masked samples, at a tenth of the default's cost (-race).
		EpisodeLength: 50, Hyperparameters: map[string]any{"epochs": 2}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Iterate(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	eval := spreadEnv(t, 8)
	if _, err := l.Evaluate(context.Background(), eval, 9, 16); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]*maskWatch{"training": train, "evaluation": eval} {
		if w.actions == 0 || w.masked != 0 {
			t.Errorf("%s: %d of %d actions were masked", name, w.masked, w.actions)
		}
	}
}
