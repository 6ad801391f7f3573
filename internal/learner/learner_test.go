package learner

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// An iteration as PPO's metrics encoded it before the learner interface:
// workflow histories and checkpoints hold these.
const ppoJSON = `{"iteration":3,"timesteps":768,"episodes":2,"episode_return_mean":21.5,"episode_return_min":12,"episode_return_max":31,"episode_length_mean":21.5,"recent_return_mean":20.25,"recent_episodes":9,"steps_per_second":5120.5,"rollout_steps_per_second":40960,"policy_loss":-0.0123,"value_loss":0.456,"entropy":0.69,"approx_kl":0.0012,"clip_fraction":0.05,"explained_variance":0.1,"grad_norm":0.4,"learning_rate":0.001,"minibatches":4,"rollouts":[{"worker":1,"node":"n1","weight_version":2,"steps":256,"episodes":1,"steps_per_second":900}]}`

func TestMetricsJSON(t *testing.T) {
	var m Metrics
	if err := json.Unmarshal([]byte(ppoJSON), &m); err != nil {
		t.Fatal(err)
	}
	if m.Iteration != 3 || m.RecentReturnMean != 20.25 || len(m.Rollouts) != 1 || m.Rollouts[0].StepsPerSecond != 900 {
		t.Fatalf("fields: %+v", m)
	}
	if m.Values["policy_loss"] != -0.0123 || m.Values["minibatches"] != 4 || len(m.Values) != 10 {
		t.Fatalf("values: %v", m.Values)
	}
	for _, f := range []string{"iteration", "rollouts", "recent_return_mean"} {
		if _, ok := m.Values[f]; ok {
			t.Errorf("field %s also a value", f)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var want, got map[string]any
	_ = json.Unmarshal([]byte(ppoJSON), &want)
	_ = json.Unmarshal(b, &got)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %s\nwant %s", b, ppoJSON)
	}
	var again Metrics
	if err := json.Unmarshal(b, &again); err != nil || !reflect.DeepEqual(again, m) {
		t.Fatalf("decode of the encoding: %+v, %v", again, err)
	}
	// A value JSON cannot hold is left out rather than failing the
	// iteration; a value named like a field cannot shadow it.
	m.Values["q_loss"], m.Values["iteration"] = inf(), 99
	if b, err = json.Marshal(m); err != nil || strings.Contains(string(b), "q_loss") || strings.Count(string(b), `"iteration"`) != 1 {
		t.Fatalf("non-finite or shadowing value: %s, %v", b, err)
	}
	if err := json.Unmarshal([]byte(`{"iteration":1,"q_loss":"high"}`), &m); err == nil {
		t.Fatal("a non-number metric decoded")
	}
}

func inf() float64 { var z float64; return 1 / z }

func TestMetricsValue(t *testing.T) {
	m := Metrics{Iteration: 2, RecentReturnMean: 0, Values: map[string]float64{"epsilon": 0.5}}
	for _, tc := range []struct {
		name string
		want float64
		ok   bool
	}{
		{"epsilon", 0.5, true}, {"iteration", 2, true}, {"recent_return_mean", 0, true},
		{"mean_return", 0, false}, {"episode_return_mean", 0, false}, {"q_loss", 0, false},
	} {
		if v, ok := m.Value(tc.name); v != tc.want || ok != tc.ok {
			t.Errorf("Value(%s) = %v, %v; want %v, %v", tc.name, v, ok, tc.want, tc.ok)
		}
	}
	if n := m.Names(); n[len(n)-1] != "epsilon" {
		t.Errorf("names: %v", n)
	}
	if got := (Metrics{Values: map[string]float64{"entropy": 0.5, "policy_loss": -1, "q_loss": 2}}).Brief(); got != "pg -1.0000  ent 0.5000  q_loss 2.0000" {
		t.Errorf("brief: %q", got)
	}
}

func TestOverlay(t *testing.T) {
	type cfg struct {
		Seed   uint64  `json:"seed"`
		Gamma  float64 `json:"gamma"`
		Hidden []int   `json:"hidden"`
		Double bool    `json:"double_q"`
	}
	for _, tc := range []struct {
		name  string
		hyper map[string]any
		field string // "" valid
		want  cfg
	}{
		{"none", nil, "", cfg{Gamma: 0.9, Hidden: []int{64, 64}}},
		{"set", map[string]any{"gamma": 0.99, "hidden": []any{32.0}, "double_q": true}, "", cfg{Gamma: 0.99, Hidden: []int{32}, Double: true}},
		{"unknown", map[string]any{"gama": 0.99}, "hyperparameters.gama", cfg{}},
		{"reserved", map[string]any{"seed": 1.0}, "hyperparameters.seed", cfg{}},
		{"mistyped", map[string]any{"gamma": "high"}, "hyperparameters.gamma", cfg{}},
		{"mistyped list", map[string]any{"hidden": []any{"wide"}}, "hyperparameters.hidden", cfg{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg{Gamma: 0.9, Hidden: []int{64, 64}}
			err := Overlay(&c, tc.hyper, "seed")
			var fe *FieldError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.field == "" && !reflect.DeepEqual(c, tc.want):
				t.Fatalf("got %+v, want %+v", c, tc.want)
			case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
				t.Fatalf("want a FieldError on %s, got %v", tc.field, err)
			}
		})
	}
}
