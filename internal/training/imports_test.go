package training

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/ppo"
	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/ipd"
	"github.com/trainyard/trainyard/sdk/go/envs/multiagent"
	"github.com/trainyard/trainyard/sdk/go/envs/native"
)

// Submission pins a policy frozen from an earlier run to that run's latest
// checkpoint and refuses references it could not play; the agent reads
// exactly the pinned one, and a pinned checkpoint that is gone since is
// fatal (retrying cannot bring it back).
func TestPinImports(t *testing.T) {
	ctx := context.Background()
	store, err := checkpoint.NewDir(t.TempDir(), checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	save := func(run string, l learner.Learner) int64 {
		t.Helper()
		var b bytes.Buffer
		if err := l.Save(&b); err != nil {
			t.Fatal(err)
		}
		m, _, err := store.Save(ctx, run, map[string]io.Reader{FileLearner: &b}, checkpoint.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		return m.Seq
	}
	env, err := multiagent.New(ipd.Spec(), 4, func() multiagent.Env { return &ipd.Env{} })
	if err != nil {
		t.Fatal(err)
	}
	champ, err := ppo.Factory{}.New(learner.Env{Train: env}, learner.Knobs{Seed: 1, Workers: 1, MultiAgent: &learner.MultiAgent{
		Policies: map[string]learner.Policy{"learner": {}, "tft": {Script: "tit_for_tat"}},
		Mapping:  map[string]string{"agent_0": "learner", "agent_1": "tft"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	save("run-champ", champ)
	save("run-champ", champ)
	cp, err := native.New(cartpole.Name, 2)
	if err != nil {
		t.Fatal(err)
	}
	single, err := ppo.Factory{}.New(learner.Env{Train: cp}, learner.Knobs{Seed: 1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	save("run-cartpole", single)

	spec := func(ref string) Spec {
		return Spec{Cluster: "lab", Env: ipd.Name, Policies: map[string]learner.Policy{"fresh": {}, "champ": {Checkpoint: ref}},
			PolicyMapping: map[string]string{"agent_0": "fresh", "agent_1": "champ"}}.WithDefaults()
	}
	for ref, want := range map[string]string{
		"run-champ":           "run-champ@2",
		"run-champ@1:learner": "run-champ@1:learner",
		"run-champ:tft":       "", // a script there
		"run-champ@9":         "", // no such checkpoint
		"run-none":            "",
		"run-cartpole":        "", // another env
	} {
		t.Run(ref, func(t *testing.T) {
			s := spec(ref)
			orig := s.Policies
			err := s.PinImports(ctx, store, ipd.Spec())
			var fe *FieldError
			switch {
			case want == "" && (!errors.As(err, &fe) || fe.Field != "policies.champ.checkpoint"):
				t.Fatalf("%v, want a field error on policies.champ.checkpoint", err)
			case want != "" && err != nil:
				t.Fatal(err)
			case want != "" && s.Policies["champ"].Checkpoint != want:
				t.Fatalf("pinned %q, want %q", s.Policies["champ"].Checkpoint, want)
			case orig["champ"].Checkpoint != ref:
				t.Fatal("pinning changed the caller's map")
			}
		})
	}

	r := &Runner{Checkpoints: store}
	pinned := spec("run-champ@2")
	got, err := r.imports(ctx, pinned)
	if err != nil || len(got["champ"]) == 0 {
		t.Fatalf("imports: %v", err)
	}
	k := pinned.Knobs()
	k.Imports = got
	if _, err := (ppo.Factory{}).New(learner.Env{Train: env}, k); err != nil {
		t.Fatalf("a learner on the read import: %v", err)
	}
	for _, ref := range []string{"run-champ", "run-champ@7"} { // unpinned; gone
		if _, err := r.imports(ctx, spec(ref)); !errors.Is(err, ErrFatal) {
			t.Errorf("%s: %v, want ErrFatal", ref, err)
		}
	}
}
