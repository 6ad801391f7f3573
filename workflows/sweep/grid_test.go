package sweep

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/ppo"
	"github.com/trainyard/trainyard/internal/training"
)

func TestExpand(t *testing.T) {
	for _, tc := range []struct {
		name string
		grid map[string][]any
		want []string // Params.String of each trial, in order
	}{
		{"empty", nil, nil},
		{"a name without values", map[string][]any{"gamma": {}}, nil},
		{"one name", map[string][]any{"learning_rate": {0.001, 0.0003}}, []string{"learning_rate=0.001", "learning_rate=0.0003"}},
		{"names sorted, last fastest", map[string][]any{"learning_rate": {0.001, 0.0003}, "gamma": {0.95, 0.99}, "seed": {1.0}},
			[]string{
				"gamma=0.95 learning_rate=0.001 seed=1", "gamma=0.95 learning_rate=0.0003 seed=1",
				"gamma=0.99 learning_rate=0.001 seed=1", "gamma=0.99 learning_rate=0.0003 seed=1",
			}},
		{"values keep their order and type", map[string][]any{"hidden": {[]any{64.0, 64.0}, []any{32.0}}, "normalize_obs": {true, false}},
			[]string{"hidden=[64,64] normalize_obs=true", "hidden=[64,64] normalize_obs=false", "hidden=[32] normalize_obs=true", "hidden=[32] normalize_obs=false"}},
		{"over the cap", map[string][]any{"a": make([]any, 17), "b": make([]any, 16)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Expand(tc.grid)
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			if !reflect.DeepEqual(s, tc.want) {
				t.Fatalf("Expand(%v) =\n%q\nwant\n%q", tc.grid, s, tc.want)
			}
			// Deterministic: the numbering must not follow map order.
			for range 5 {
				again := Expand(tc.grid)
				if !reflect.DeepEqual(again, got) {
					t.Fatalf("Expand is not deterministic: %v vs %v", again, got)
				}
			}
		})
	}
	if n := Size(map[string][]any{"a": make([]any, 1<<20), "b": make([]any, 1<<20), "c": make([]any, 1<<20)}); n <= MaxTrials {
		t.Fatalf("Size of a huge grid = %d, want it refused", n)
	}
}

func TestNormalize(t *testing.T) {
	in := map[string][]any{"hidden": {32.0, []any{16.0}}, "learning_rate": {0.001}}
	got := Normalize(in, ppo.CartPoleConfig())
	want := map[string][]any{"hidden": {[]any{32.0, 32.0}, []any{16.0}}, "learning_rate": {0.001}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Normalize = %v, want %v", got, want)
	}
	if in["hidden"][0] != 32.0 {
		t.Fatal("Normalize changed its input")
	}
}

func TestTrialSpec(t *testing.T) {
	base := training.Spec{Cluster: "lab", Env: "cartpole", Hyperparameters: map[string]any{"epochs": 4.0}}
	s, err := TrialSpec(base, Params{"learning_rate": 0.001, "seed": 7.0, "envs_per_worker": 4.0})
	if err != nil {
		t.Fatal(err)
	}
	if s.Seed != 7 || s.EnvsPerWorker != 4 || s.Hyperparameters["learning_rate"] != 0.001 || s.Hyperparameters["epochs"] != 4.0 {
		t.Fatalf("trial spec %+v", s)
	}
	if _, ok := base.Hyperparameters["learning_rate"]; ok {
		t.Fatal("TrialSpec changed the base spec's hyper-parameters")
	}
	if _, err := TrialSpec(base, Params{"seed": 1.5}); err == nil || !strings.Contains(err.Error(), "grid.seed") {
		t.Fatalf("fractional seed: %v", err)
	}

	cmd := training.Spec{Cluster: "lab", Algorithm: training.AlgorithmCommand, Command: []string{"python", "train.py", "--lr={lr}", "--tag", "{lr}-{bs}"}}
	s, err = TrialSpec(cmd, Params{"lr": 0.01, "bs": 64.0})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"python", "train.py", "--lr=0.01", "--tag", "0.01-64"}; !reflect.DeepEqual(s.Command, want) {
		t.Fatalf("command %q, want %q", s.Command, want)
	}
	if cmd.Command[2] != "--lr={lr}" {
		t.Fatal("TrialSpec changed the base command")
	}
	if _, err := TrialSpec(cmd, Params{"gamma": 0.9}); err == nil || !strings.Contains(err.Error(), "{gamma}") {
		t.Fatalf("a grid name the command never uses: %v", err)
	}
}

func TestValidateTrials(t *testing.T) {
	ppoRun := training.Spec{Cluster: "lab", Env: "cartpole"}.WithDefaults()
	cmdRun := training.Spec{Cluster: "lab", Algorithm: training.AlgorithmCommand, Command: []string{"train", "--lr={lr}"}}.WithDefaults()
	for _, tc := range []struct {
		name string
		spec SweepSpec
		want []string // field: reason substrings, one per problem
	}{
		{"ok", SweepSpec{Run: ppoRun, Grid: map[string][]any{"learning_rate": {0.001, 0.0003}, "seed": {1.0, 2.0}}}, nil},
		{"empty grid", SweepSpec{Run: ppoRun}, []string{"grid: empty"}},
		{"name without values", SweepSpec{Run: ppoRun, Grid: map[string][]any{"gamma": {}}}, []string{"grid.gamma: needs at least one value"}},
		{"unknown hyper-parameter", SweepSpec{Run: ppoRun, Grid: map[string][]any{"learning_rat": {0.1, 0.2}}}, []string{"grid.learning_rat: unknown hyper-parameter"}},
		{"bad value", SweepSpec{Run: ppoRun, Grid: map[string][]any{"gamma": {0.9, "high"}}}, []string{"grid.gamma: got a string, want a number"}},
		{"knob out of range", SweepSpec{Run: ppoRun, Grid: map[string][]any{"workers": {1.0, 500.0}}}, []string{"grid.workers: must be 1..64", "grid: trial workers=500"}},
		{"too many trials", SweepSpec{Run: ppoRun, Grid: map[string][]any{"seed": make([]any, 300)}}, []string{"grid: expands to 300 trials"}},
		{"bad base", SweepSpec{Run: training.Spec{Env: "cartpole"}.WithDefaults(), Grid: map[string][]any{"seed": {1.0}}}, []string{"run.cluster: required"}},
		{"gpus for the built-in learner", SweepSpec{Run: ppoRun, GPUsPerTrial: 0.5, Grid: map[string][]any{"seed": {1.0}}}, []string{"gpus_per_trial: the built-in learner"}},
		{"gpus not a share", SweepSpec{Run: cmdRun, GPUsPerTrial: 1.5, Grid: map[string][]any{"lr": {1.0}}}, []string{"gpus_per_trial: must be a fraction"}},
		{"command trial ok", SweepSpec{Run: cmdRun, GPUsPerTrial: 0.25, MaxConcurrent: 8, Grid: map[string][]any{"lr": {0.1, 0.01}}}, nil},
		{"command never sees a name", SweepSpec{Run: cmdRun, Grid: map[string][]any{"lr": {0.1}, "gamma": {0.9}}}, []string{"grid.gamma: a command trial"}},
		{"max concurrent", SweepSpec{Run: ppoRun, MaxConcurrent: -1, Grid: map[string][]any{"seed": {1.0}}}, []string{"max_concurrent: must be"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateTrials(tc.spec, "CartPole-v1")
			var got []string
			for _, e := range unwrap(err) {
				var fe *training.FieldError
				if !errors.As(e, &fe) {
					t.Fatalf("%v is not a FieldError", e)
				}
				got = append(got, fe.Error())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d problems %q, want %d like %q", len(got), got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("problem %d: %q, want it to start with %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}
