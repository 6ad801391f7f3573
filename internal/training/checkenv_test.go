package training

import (
	"errors"
	"testing"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/ipd"
)

// A multi-agent env is refused at submission where the run cannot train
// it, naming the field.
func TestCheckEnvRefusesWhatAMultiAgentRunCannotDo(t *testing.T) {
	base := Spec{Cluster: "lab", Env: ipd.Name}.WithDefaults()
	for name, tc := range map[string]struct {
		edit  func(*Spec)
		field string
	}{
		"fits":             {func(*Spec) {}, ""},
		"odd slots":        {func(s *Spec) { s.EnvsPerWorker = 7 }, "envs_per_worker"},
		"rollout workers":  {func(s *Spec) { s.RolloutWorkers = 2 }, ""},
		"odd worker slots": {func(s *Spec) { s.RolloutWorkers, s.Workers, s.EnvsPerWorker = 2, 2, 3 }, "envs_per_worker"},
		"bad hp":           {func(s *Spec) { s.Hyperparameters = map[string]any{"gamma": 3} }, "hyperparameters"},
		"unknown field hp": {func(s *Spec) { s.Hyperparameters = map[string]any{"nope": 1} }, "hyperparameters.nope"},
	} {
		t.Run(name, func(t *testing.T) {
			s := base
			tc.edit(&s)
			err := s.CheckEnv(ipd.Spec())
			var fe *learner.FieldError
			switch {
			case tc.field == "" && err != nil:
				t.Fatal(err)
			case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
				t.Fatalf("CheckEnv: %v, want a field error on %s", err, tc.field)
			}
		})
	}
	if err := base.CheckEnv(cartpole.Spec()); err != nil {
		t.Errorf("a single-agent env: %v", err)
	}
	// A rollout worker's fragment carries the action masks.
	masked := cartpole.Spec()
	masked.ActionMask = true
	dist := Spec{Cluster: "lab", Env: cartpole.Name, RolloutWorkers: 2, RolloutCPUs: 1}.WithDefaults()
	for _, env := range []envs.Spec{masked, cartpole.Spec()} {
		if err := dist.CheckEnv(env); err != nil {
			t.Errorf("rollout workers on %s (masked %v): %v", env.Name, env.ActionMask, err)
		}
	}
}
