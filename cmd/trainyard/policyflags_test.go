package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/training"
)

func TestPolicyFlags(t *testing.T) {
	for name, tc := range map[string]struct {
		p    policyFlags
		want map[string]learner.Policy
		err  string
	}{
		"network, script, checkpoint": {
			p:    policyFlags{policies: []string{"a", "t=tit_for_tat", "c=checkpoint:run-1@2:learner"}},
			want: map[string]learner.Policy{"a": {}, "t": {Script: "tit_for_tat"}, "c": {Checkpoint: "run-1@2:learner"}},
		},
		"one policy's hyper-parameters": {
			p:    policyFlags{policies: []string{"a", "b"}, sets: []string{"b:learning_rate=0.001", "b:hidden=64,64"}},
			want: map[string]learner.Policy{"a": {}, "b": {Hyperparameters: map[string]any{"learning_rate": 0.001, "hidden": []any{64.0, 64.0}}}},
		},
		"set on no policy":   {p: policyFlags{policies: []string{"a"}, sets: []string{"b:gamma=0.9"}}, err: "no --policy b"},
		"set without a name": {p: policyFlags{policies: []string{"a"}, sets: []string{"gamma=0.9"}}, err: "want POLICY:NAME=VALUE"},
		"set without value":  {p: policyFlags{policies: []string{"a"}, sets: []string{"a:gamma"}}, err: "want name=value"},
		"empty policy":       {p: policyFlags{policies: []string{"=x"}}, err: "want NAME or NAME=SCRIPT"},
		"league":             {p: policyFlags{policies: []string{"a"}, league: []string{"agent_1=t,c"}}, want: map[string]learner.Policy{"a": {}}},
		"league without one": {p: policyFlags{league: []string{"agent_1="}}, err: "want AGENT=POLICY,POLICY"},
	} {
		t.Run(name, func(t *testing.T) {
			var s training.Spec
			err := tc.p.apply(&s)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("%v, want %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err == "" && !reflect.DeepEqual(s.Policies, tc.want):
				t.Fatalf("policies %#v, want %#v", s.Policies, tc.want)
			case len(tc.p.league) > 0 && tc.err == "" && !reflect.DeepEqual(s.League, map[string][]string{"agent_1": {"t", "c"}}):
				t.Fatalf("league %v", s.League)
			}
		})
	}
}
