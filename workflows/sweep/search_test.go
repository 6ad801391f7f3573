package sweep

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/training"
)

func randomSpec(seed uint64, n int) SweepSpec {
	return SweepSpec{
		Run: training.Spec{Cluster: "lab", Env: "CartPole-v1"}.WithDefaults(), Search: SearchRandom, NumSamples: n, SearchSeed: seed,
		ParamSpace: map[string]Distribution{
			"learning_rate": {Kind: DistLogUniform, Min: 1e-5, Max: 3e-3},
			"gamma":         {Kind: DistUniform, Min: 0.9, Max: 0.999},
			"seed":          {Kind: DistRandInt, Min: 1, Max: 1000},
			"hidden":        {Kind: DistChoice, Values: []any{[]any{32.0, 32.0}, []any{64.0, 64.0}}},
		},
	}
}

// TestRandomTrialsDeterministic: the same spec draws the same trials
// (the API and every replay of the workflow see one list), a different
// seed others, every value inside its distribution; a grid multiplies
// the samples.
func TestRandomTrialsDeterministic(t *testing.T) {
	a, b := Trials(randomSpec(42, 16)), Trials(randomSpec(42, 16))
	if len(a) != 16 || !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 42 drew %d trials, then different ones:\n%v\n%v", len(a), a, b)
	}
	if c := Trials(randomSpec(43, 16)); reflect.DeepEqual(a, c) {
		t.Fatal("seeds 42 and 43 drew the same trials")
	}
	distinct := map[float64]bool{}
	for _, p := range a {
		lr, g, seed := p["learning_rate"].(float64), p["gamma"].(float64), p["seed"].(float64)
		if lr < 1e-5 || lr > 3e-3 || g < 0.9 || g > 0.999 || seed < 1 || seed >= 1000 || seed != math.Trunc(seed) {
			t.Errorf("trial %s outside its distributions", p)
		}
		if h := p["hidden"].([]any); len(h) != 2 {
			t.Errorf("trial %s: hidden not one of the choices", p)
		}
		distinct[lr] = true
	}
	if len(distinct) < 12 {
		t.Errorf("16 log-uniform draws gave %d distinct learning rates", len(distinct))
	}
	// Draws keep 4 significant digits.
	if s := FormatValue(a[0]["learning_rate"]); len(strings.TrimLeft(strings.SplitN(s, "e", 2)[0], "0.")) > 4 {
		t.Errorf("learning_rate %s has more than 4 significant digits", s)
	}
	// A fixed draw: a change to the sampler would change running sweeps' trials.
	if got := Trials(randomSpec(7, 1))[0].String(); got != "gamma=0.9031 hidden=[32,32] learning_rate=0.00008669 seed=692" {
		t.Errorf("seed 7's first trial: %s", got)
	}
	grid := randomSpec(42, 3)
	grid.ParamSpace = map[string]Distribution{"learning_rate": grid.ParamSpace["learning_rate"]}
	grid.Grid = map[string][]any{"seed": {1.0, 2.0}}
	g := Trials(grid)
	if len(g) != 6 || g[0]["seed"] != 1.0 || g[1]["seed"] != 2.0 || g[0]["learning_rate"] == g[2]["learning_rate"] {
		t.Errorf("3 samples × grid of 2: %v", g)
	}
}

func TestValidateSearch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*SweepSpec)
		field string
	}{
		{"valid", func(*SweepSpec) {}, ""},
		{"no samples", func(s *SweepSpec) { s.NumSamples = 0 }, "num_samples"},
		{"too many", func(s *SweepSpec) { s.NumSamples = 100; s.Grid = map[string][]any{"epochs": {4.0, 8.0, 10.0}} }, "num_samples"},
		{"empty space", func(s *SweepSpec) { s.ParamSpace = nil }, "param_space"},
		{"bad kind", func(s *SweepSpec) { s.ParamSpace["gamma"] = Distribution{Kind: "normal"} }, "param_space.gamma"},
		{"loguniform from 0", func(s *SweepSpec) { s.ParamSpace["learning_rate"] = Distribution{Kind: DistLogUniform, Max: 1} }, "param_space.learning_rate"},
		{"uniform upside down", func(s *SweepSpec) { s.ParamSpace["gamma"] = Distribution{Kind: DistUniform, Min: 1, Max: 0.9} }, "param_space.gamma"},
		{"randint with no whole number", func(s *SweepSpec) { s.ParamSpace["seed"] = Distribution{Kind: DistRandInt, Min: 1.2, Max: 1.8} }, "param_space.seed"},
		{"empty choice", func(s *SweepSpec) { s.ParamSpace["hidden"] = Distribution{Kind: DistChoice} }, "param_space.hidden"},
		{"in grid too", func(s *SweepSpec) { s.Grid = map[string][]any{"gamma": {0.9}} }, "param_space.gamma"},
		{"unknown search", func(s *SweepSpec) { s.Search = "bayes" }, "search"},
		{"space without random", func(s *SweepSpec) { s.Search = "" }, "param_space"},
		{"samples with grid", func(s *SweepSpec) { s.Search, s.ParamSpace, s.Grid = SearchGrid, nil, map[string][]any{"seed": {1.0}} }, "num_samples"},
		{"an unknown name", func(s *SweepSpec) { s.ParamSpace["learning_rat"] = Distribution{Kind: DistUniform, Min: 0, Max: 1} }, "param_space.learning_rat"},
		{"a knob needs whole numbers", func(s *SweepSpec) { s.ParamSpace["seed"] = Distribution{Kind: DistUniform, Min: 1, Max: 2} }, "param_space.seed"},
		{"scheduler on a command", func(s *SweepSpec) {
			s.Run = training.Spec{Cluster: "lab", Algorithm: training.AlgorithmCommand, Command: []string{"x", "{learning_rate}", "{gamma}", "{seed}", "{hidden}"}}.WithDefaults()
			s.Scheduler = &Scheduler{Type: SchedulerASHA}
		}, "scheduler"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := randomSpec(1, 4)
			tc.edit(&s)
			err := ValidateTrials(s.Normalized("CartPole-v1"), "CartPole-v1")
			if tc.field == "" {
				if err != nil {
					t.Fatalf("want valid: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains("\n"+err.Error(), "\n"+tc.field+": ") {
				t.Fatalf("error %v, want it at %s", err, tc.field)
			}
		})
	}
}
