package ppo

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/trainyard/trainyard/internal/learner"
)

// A policy frozen from an earlier run's checkpoint (a league opponent)
// acts with that run's network and observation statistics, never trains,
// and is kept in the new run's checkpoints like any policy (resume exact).
func TestMultiAgentImportedPolicy(t *testing.T) {
	ctx := context.Background()
	earlier, err := Factory{}.New(learner.Env{Train: ipdEnv(t, 4)}, learner.Knobs{Seed: 1, Workers: 2, MultiAgent: versusTFT})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := earlier.Iterate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var ck bytes.Buffer
	if err := earlier.Save(&ck); err != nil {
		t.Fatal(err)
	}
	champ := earlier.(*multi).pols[0].l // "learner" sorts before "tft"
	league := &learner.MultiAgent{
		Policies: map[string]learner.Policy{"fresh": {}, "champ": {Checkpoint: "run-a@1:learner"}},
		Mapping:  map[string]string{"agent_0": "fresh", "agent_1": "champ"},
	}
	knobs := learner.Knobs{Seed: 9, Workers: 2, EpisodeLength: 48, MultiAgent: league, Imports: map[string][]byte{"champ": ck.Bytes()}}
	// Different games (3, not 4) and a different num_steps: only the
	// network and its statistics come along.
	l, err := Factory{}.New(learner.Env{Train: ipdEnv(t, 3)}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	got := l.(*multi).pols[0]
	if got.name != "champ" || got.train || !slices.Equal(got.l.params, champ.params) || !slices.Equal(got.l.obsRMS.Mean, champ.obsRMS.Mean) {
		t.Fatalf("policy %s (train %v) is not the earlier run's learner", got.name, got.train)
	}
	for range 2 {
		m, err := l.Iterate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := m.Values["policy/champ/policy_loss"]; ok {
			t.Fatal("the imported policy trains")
		}
	}
	if !slices.Equal(got.l.params, champ.params) || !slices.Equal(got.l.obsRMS.Mean, champ.obsRMS.Mean) {
		t.Fatal("the imported policy's weights or observation statistics changed")
	}
	var ck2 bytes.Buffer
	if err := l.Save(&ck2); err != nil {
		t.Fatal(err)
	}
	// Its own checkpoint needs no import to resume.
	r, err := Factory{}.Restore(bytes.NewReader(ck2.Bytes()), learner.Env{Train: ipdEnv(t, 3)})
	if err != nil {
		t.Fatal(err)
	}
	ma, _ := l.Iterate(ctx)
	mb, err := r.Iterate(ctx)
	if err != nil || ma.RecentReturnMean != mb.RecentReturnMean || ma.Values["policy/champ/action_0_rate"] != mb.Values["policy/champ/action_0_rate"] {
		t.Fatalf("resumed: %v, %v vs %v", err, mb.Values, ma.Values)
	}

	for name, tc := range map[string]struct {
		ref  string
		data []byte
	}{
		"no such policy":   {"run-a@1:ghost", ck.Bytes()},
		"a script":         {"run-a@1:tft", ck.Bytes()},
		"not a checkpoint": {"run-a@1", []byte("hello")},
		"not read":         {"run-a@1", nil},
	} {
		t.Run(name, func(t *testing.T) {
			k := knobs
			k.MultiAgent = &learner.MultiAgent{Policies: map[string]learner.Policy{"fresh": {}, "champ": {Checkpoint: tc.ref}}, Mapping: league.Mapping}
			k.Imports = map[string][]byte{}
			if tc.data != nil {
				k.Imports["champ"] = tc.data
			}
			_, err := Factory{}.New(learner.Env{Train: ipdEnv(t, 3)}, k)
			if err == nil {
				t.Fatal("imported")
			}
			if tc.data != nil && !errors.Is(err, ErrCheckpoint) && name != "not a checkpoint" {
				t.Errorf("%v, want ErrCheckpoint", err)
			}
		})
	}
}
