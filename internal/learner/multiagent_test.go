package learner

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestResolveMapsAgentsToPolicies(t *testing.T) {
	agents := []string{"agent_0", "agent_1", "agent_2"}
	for name, tc := range map[string]struct {
		ma     *MultiAgent
		want   []string // policy per agent
		train  []string
		fieldE string // a FieldError on this field, or ""
	}{
		"default shares one policy": {ma: nil, want: []string{"shared", "shared", "shared"}, train: []string{"shared"}},
		"own name beats a pattern": {ma: &MultiAgent{
			Policies: map[string]Policy{"a": {}, "b": {}},
			Mapping:  map[string]string{"agent_*": "a", "agent_2": "b"},
		}, want: []string{"a", "a", "b"}, train: []string{"a", "b"}},
		"more literal pattern wins": {ma: &MultiAgent{
			Policies: map[string]Policy{"a": {}, "b": {}},
			Mapping:  map[string]string{"*": "a", "agent_?": "b"},
		}, want: []string{"b", "b", "b"}, fieldE: "policies.a"},
		"script is frozen": {ma: &MultiAgent{
			Policies: map[string]Policy{"l": {}, "t": {Script: "tit_for_tat"}},
			Mapping:  map[string]string{"agent_0": "t", "*": "l"},
		}, want: []string{"t", "l", "l"}, train: []string{"l"}},
		"frozen network": {ma: &MultiAgent{Policies: map[string]Policy{"l": {}, "f": {}}, Mapping: map[string]string{"agent_0": "f", "*": "l"}, Train: []string{"l"}}, want: []string{"f", "l", "l"}, train: []string{"l"}},
		"checkpoint is frozen": {ma: &MultiAgent{
			Policies: map[string]Policy{"l": {}, "c": {Checkpoint: "run-1@2:learner"}},
			Mapping:  map[string]string{"agent_0": "c", "*": "l"},
		}, want: []string{"c", "l", "l"}, train: []string{"l"}},
		"train a checkpoint":      {ma: &MultiAgent{Policies: map[string]Policy{"l": {}, "c": {Checkpoint: "run-1"}}, Mapping: map[string]string{"agent_0": "c", "*": "l"}, Train: []string{"c"}}, fieldE: "policies_to_train"},
		"checkpoint and script":   {ma: &MultiAgent{Policies: map[string]Policy{"l": {}, "c": {Checkpoint: "run-1", Script: "x"}}, Mapping: map[string]string{"agent_0": "c", "*": "l"}}, fieldE: "policies.c"},
		"checkpoint with hps":     {ma: &MultiAgent{Policies: map[string]Policy{"l": {}, "c": {Checkpoint: "run-1", Hyperparameters: map[string]any{"gamma": 0.9}}}, Mapping: map[string]string{"agent_0": "c", "*": "l"}}, fieldE: "policies.c"},
		"bad checkpoint":          {ma: &MultiAgent{Policies: map[string]Policy{"l": {}, "c": {Checkpoint: "run-1@x"}}, Mapping: map[string]string{"agent_0": "c", "*": "l"}}, fieldE: "policies.c.checkpoint"},
		"mapping required":        {ma: &MultiAgent{Policies: map[string]Policy{"a": {}, "b": {}}}, fieldE: "policy_mapping"},
		"unknown policy":          {ma: &MultiAgent{Mapping: map[string]string{"*": "nope"}}, fieldE: "policy_mapping.*"},
		"unmapped agent":          {ma: &MultiAgent{Policies: map[string]Policy{"a": {}}, Mapping: map[string]string{"agent_0": "a"}}, fieldE: "policy_mapping"},
		"ambiguous":               {ma: &MultiAgent{Policies: map[string]Policy{"a": {}, "b": {}}, Mapping: map[string]string{"agent_*": "a", "*gent_0": "b", "agent_1": "b", "agent_2": "b"}}, fieldE: "policy_mapping"},
		"train a script":          {ma: &MultiAgent{Policies: map[string]Policy{"l": {}, "t": {Script: "x"}}, Mapping: map[string]string{"agent_0": "t", "*": "l"}, Train: []string{"t"}}, fieldE: "policies_to_train"},
		"nothing trains":          {ma: &MultiAgent{Train: []string{}}, fieldE: "policies_to_train"},
		"bad name":                {ma: &MultiAgent{Policies: map[string]Policy{"a/b": {}}}, fieldE: "policies"},
		"script with hps":         {ma: &MultiAgent{Policies: map[string]Policy{"t": {Script: "x", Hyperparameters: map[string]any{"gamma": 0.9}}}}, fieldE: "policies.t"},
		"bad pattern":             {ma: &MultiAgent{Mapping: map[string]string{"[": "shared"}, Policies: map[string]Policy{"shared": {}}}, fieldE: "policy_mapping"},
		"unknown policy to train": {ma: &MultiAgent{Train: []string{"ghost"}}, fieldE: "policies_to_train"},
		"league member mapped":    {ma: leagueOf(map[string]string{"agent_0": "x", "*": "l"}, nil), fieldE: "policy_mapping.agent_0"},
		"league member trains":    {ma: leagueOf(map[string]string{"*": "l"}, []string{"l", "x"}), fieldE: "policies_to_train"},
		"unknown league member":   {ma: &MultiAgent{Policies: map[string]Policy{"l": {}}, Mapping: map[string]string{"*": "l"}, League: map[string][]string{"agent_2": {"ghost"}}}, fieldE: "league.agent_2"},
		"empty league":            {ma: &MultiAgent{Policies: map[string]Policy{"l": {}}, Mapping: map[string]string{"*": "l"}, League: map[string][]string{"agent_2": {}}}, fieldE: "league.agent_2"},
		"all in the league":       {ma: &MultiAgent{Policies: map[string]Policy{"x": {}}, League: map[string][]string{"*": {"x"}}}, fieldE: "league"},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := tc.ma.Resolve(agents)
			if tc.fieldE != "" && tc.want == nil {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tc.fieldE {
					t.Fatalf("Resolve: %v, want a field error on %s", err, tc.fieldE)
				}
				return
			}
			if tc.fieldE != "" { // mapped as wanted, then refused
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tc.fieldE || !strings.Contains(fe.Reason, "no agent") {
					t.Fatalf("Resolve: %v, want the unused policy refused on %s", err, tc.fieldE)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got, train []string
			for _, i := range r.Agent {
				got = append(got, r.Names[i])
			}
			for i, tr := range r.Train {
				if tr {
					train = append(train, r.Names[i])
				}
			}
			if !slices.Equal(got, tc.want) || !slices.Equal(train, tc.train) {
				t.Fatalf("agents → %v (train %v), want %v (train %v)", got, train, tc.want, tc.train)
			}
		})
	}
}

func TestResolveSingleAgent(t *testing.T) {
	if _, err := (&MultiAgent{Policies: map[string]Policy{"a": {}}}).Resolve(nil); err == nil {
		t.Fatal("policies on a single-agent env were accepted")
	}
	if _, err := (*MultiAgent)(nil).Resolve(nil); err != nil {
		t.Fatal(err)
	}
}

func FuzzParseCheckpointRef(f *testing.F) {
	for _, s := range []string{"run-1", "run-1@3", "run-1@3:learner", "run-1:learner", "@3", "run-1@0", "run 1", "a/b", "run-1@3:a/b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseCheckpointRef(s)
		if err != nil {
			return
		}
		if r.Run == "" || r.Seq < 0 {
			t.Fatalf("%q parsed as %+v", s, r)
		}
		back, err := ParseCheckpointRef(r.String())
		if err != nil || back != r {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, r, r.String(), back, err)
		}
	})
}

// leagueOf is agent_2 playing x or the tit-for-tat script y.
func leagueOf(mapping map[string]string, train []string) *MultiAgent {
	return &MultiAgent{Policies: map[string]Policy{"l": {}, "x": {}, "y": {Script: "tit_for_tat"}}, Mapping: mapping, Train: train,
		League: map[string][]string{"agent_2": {"x", "y"}}}
}

// TestResolveLeague: a league agent maps to no policy but to its members,
// which stay frozen; each episode of each instance draws one, and every
// member is drawn.
func TestResolveLeague(t *testing.T) {
	r, err := leagueOf(map[string]string{"*": "l"}, nil).Resolve([]string{"agent_0", "agent_1", "agent_2"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Agent, []int{0, 0, -1}) || r.League[0] != nil || !slices.Equal(r.League[2], []int{1, 2}) ||
		!slices.Equal(r.Member, []bool{false, true, true}) || !slices.Equal(r.Train, []bool{true, false, false}) {
		t.Fatalf("resolved %+v", r)
	}
	// Over 1,000 episodes of one game: both members about equally, and
	// no pattern in consecutive draws (a weak hash alternated them).
	seen, repeats := map[int]int{}, 0
	for ep := range int64(1000) {
		d := r.Drawn(1, 2, 3, ep)
		seen[d]++
		if ep > 0 && d == r.Drawn(1, 2, 3, ep-1) {
			repeats++
		}
	}
	if len(seen) != 2 || seen[1] < 430 || seen[2] < 430 || repeats < 430 || repeats > 570 {
		t.Fatalf("1,000 episodes of one game drew %v, %d times the previous episode's member", seen, repeats)
	}
	if r.Drawn(1, 2, 3, 7) != r.Drawn(1, 2, 3, 7) {
		t.Fatal("a draw is not a function of its inputs")
	}
}
