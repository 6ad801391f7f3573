package reinforce

import (
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/ppo"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
)

// TestSpecIsChecked: the registry validates reinforce like the built-in
// learner (an env, no command), and a run's knobs still win.
func TestSpecIsChecked(t *testing.T) {
	bad := training.Spec{Cluster: "test", Algorithm: Name, Command: []string{"python"}}.WithDefaults()
	err := bad.Validate()
	if err == nil {
		t.Fatal("a reinforce run without env but with a command validated")
	}
	for _, want := range []string{"env: required", `command: command, gpus and nodes belong to algorithm "command", not "reinforce"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	s := training.Spec{Cluster: "test", Env: cartpole.Name, Algorithm: Name, BatchSize: 64, Hyperparameters: map[string]any{"epochs": 2}}.WithDefaults()
	cfg, err := ppoConfig(s, cartpole.Name)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinibatchSize != 64 || cfg.Epochs != 2 {
		t.Fatalf("the run's batch_size and epochs did not win: %+v", cfg)
	}
}

func ppoConfig(s training.Spec, envName string) (ppo.Config, error) {
	c, err := s.LearnerConfig(envName)
	if err != nil {
		return ppo.Config{}, err
	}
	return c.(ppo.Config), nil
}
