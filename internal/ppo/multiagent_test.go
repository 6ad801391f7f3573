package ppo

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/envs/ipd"
	"github.com/trainyard/trainyard/sdk/go/envs/multiagent"
)

func ipdEnv(t testing.TB, instances int) envs.VecEnv {
	t.Helper()
	env, err := multiagent.New(ipd.Spec(), 2*instances, func() multiagent.Env { return &ipd.Env{} })
	if err != nil {
		t.Fatal(err)
	}
	return env
}

var (
	versusTFT = &learner.MultiAgent{
		Policies: map[string]learner.Policy{"learner": {}, "tft": {Script: "tit_for_tat"}},
		Mapping:  map[string]string{"agent_0": "learner", "agent_1": "tft"},
	}
	// league: agent_1 plays tit-for-tat or a frozen fresh network, drawn
	// per episode.
	league = &learner.MultiAgent{
		Policies: map[string]learner.Policy{"learner": {}, "tft": {Script: "tit_for_tat"}, "still": {}},
		Mapping:  map[string]string{"agent_0": "learner"},
		League:   map[string][]string{"agent_1": {"tft", "still"}},
	}
	twoPolicies = &learner.MultiAgent{
		Policies: map[string]learner.Policy{"agent_0": {}, "agent_1": {Hyperparameters: map[string]any{"learning_rate": 1e-3}}},
		Mapping:  map[string]string{"agent_*": "agent_0", "agent_1": "agent_1"},
	}
)

func TestMultiAgentResumeIsExact(t *testing.T) {
	for name, ma := range map[string]*learner.MultiAgent{"versus tft": versusTFT, "two policies": twoPolicies, "shared": nil, "league": league} {
		t.Run(name, func(t *testing.T) {
			knobs := learner.Knobs{Seed: 7, Workers: 2, EpisodeLength: 48, MultiAgent: ma}
			a, err := Factory{}.New(learner.Env{Train: ipdEnv(t, 3)}, knobs)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for range 3 { // 144 steps: mid-episode
				if _, err := a.Iterate(ctx); err != nil {
					t.Fatal(err)
				}
			}
			var ck bytes.Buffer
			if err := a.Save(&ck); err != nil {
				t.Fatal(err)
			}
			b, err := Factory{}.Restore(bytes.NewReader(ck.Bytes()), learner.Env{Train: ipdEnv(t, 3)})
			if err != nil {
				t.Fatal(err)
			}
			var again bytes.Buffer
			if err := b.Save(&again); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ck.Bytes(), again.Bytes()) {
				t.Fatal("a restored learner saves different bytes")
			}
			for range 3 {
				ma, err := a.Iterate(ctx)
				if err != nil {
					t.Fatal(err)
				}
				mb, err := b.Iterate(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range ma.Values {
					if k != "steps_per_second" && !isTiming(k) && mb.Values[k] != v {
						t.Fatalf("iteration %d: %s = %v after the restore, %v without", ma.Iteration, k, mb.Values[k], v)
					}
				}
				if ma.Iteration != mb.Iteration || ma.Timesteps != mb.Timesteps || ma.RecentReturnMean != mb.RecentReturnMean {
					t.Fatalf("counters differ: %+v vs %+v", ma, mb)
				}
			}
		})
	}
}

func isTiming(k string) bool {
	return bytes.HasSuffix([]byte(k), []byte("steps_per_second"))
}

func TestMultiAgentCheckpointRefusals(t *testing.T) {
	a, err := Factory{}.New(learner.Env{Train: ipdEnv(t, 2)}, learner.Knobs{Seed: 1, Workers: 1, MultiAgent: versusTFT})
	if err != nil {
		t.Fatal(err)
	}
	var ck bytes.Buffer
	if err := a.Save(&ck); err != nil {
		t.Fatal(err)
	}
	data := ck.Bytes()
	for name, tc := range map[string]struct {
		data []byte
		env  envs.VecEnv
	}{
		"other size":  {data, ipdEnv(t, 3)},
		"truncated":   {data[:len(data)/2], ipdEnv(t, 2)},
		"single ckpt": {nil, ipdEnv(t, 2)},
	} {
		t.Run(name, func(t *testing.T) {
			d := tc.data
			if d == nil {
				var b bytes.Buffer
				l, _ := New(slotView{spec: ipd.Spec(), n: 4}, DefaultConfig())
				_ = l.Save(&b)
				d = b.Bytes()
			}
			if _, err := (Factory{}).Restore(bytes.NewReader(d), learner.Env{Train: tc.env}); !errors.Is(err, ErrCheckpoint) {
				t.Fatalf("restore: %v, want ErrCheckpoint", err)
			}
		})
	}
}

func TestMultiAgentSpecErrors(t *testing.T) {
	spec := ipd.Spec()
	for name, tc := range map[string]struct {
		ma    *learner.MultiAgent
		field string
	}{
		"unknown script":    {&learner.MultiAgent{Policies: map[string]learner.Policy{"a": {}, "b": {Script: "grim"}}, Mapping: map[string]string{"agent_0": "a", "agent_1": "b"}}, "policies.b.script"},
		"bad hp in policy":  {&learner.MultiAgent{Policies: map[string]learner.Policy{"a": {Hyperparameters: map[string]any{"gamma": 2}}}}, "policies.a.hyperparameters"},
		"num_steps differs": {&learner.MultiAgent{Policies: map[string]learner.Policy{"a": {}, "b": {Hyperparameters: map[string]any{"num_steps": 7}}}, Mapping: map[string]string{"agent_0": "a", "agent_1": "b"}}, "policies.b.hyperparameters.num_steps"},
	} {
		t.Run(name, func(t *testing.T) {
			err := Factory{}.CheckEnv(spec, learner.Knobs{Seed: 1, Workers: 1, MultiAgent: tc.ma})
			var fe *learner.FieldError
			if !errors.As(err, &fe) || len(fe.Field) < len(tc.field) || fe.Field[:len(tc.field)] != tc.field {
				t.Fatalf("CheckEnv: %v, want a field error on %s", err, tc.field)
			}
		})
	}
}

// TestLeagueDrawsEachEpisode: the league agent's episodes are played
// against both members, counted in each member's numbers; the members do
// not train; evaluation plays them in turn.
func TestLeagueDrawsEachEpisode(t *testing.T) {
	l, err := Factory{}.New(learner.Env{Train: ipdEnv(t, 8)}, learner.Knobs{Seed: 5, Workers: 1, EpisodeLength: 100, MultiAgent: league})
	if err != nil {
		t.Fatal(err)
	}
	episodes := map[string]float64{}
	for range 4 {
		m, err := l.Iterate(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"learner", "tft", "still"} {
			episodes[p] += m.Values["policy/"+p+"/episodes"]
		}
		if _, ok := m.Values["policy/still/policy_loss"]; ok {
			t.Fatal("a league member trains")
		}
	}
	// 8 instances × 4 episodes: the learner plays all 32, the members share them.
	if episodes["learner"] != 32 || episodes["tft"]+episodes["still"] != 32 || episodes["tft"] < 6 || episodes["still"] < 6 {
		t.Fatalf("episodes by policy: %v", episodes)
	}
	ev, err := l.Evaluate(context.Background(), ipdEnv(t, 4), 1, 8)
	if err != nil || ev.Episodes < 8 {
		t.Fatalf("evaluate: %+v %v", ev, err)
	}
}
