package ppo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/envs/ipd"
	"github.com/trainyard/trainyard/sdk/go/envs/multiagent"
	"github.com/trainyard/trainyard/sdk/go/envs/spread"
)

// distSim is a trainer and its actors in one process, through the
// encodings the rollout bus carries (learner.Distributor).
type distSim struct {
	trainer learner.Trainer
	actors  []learner.Actor
}

func newDistSim(t testing.TB, spec envs.Spec, open func(instances int) envs.VecEnv, workers, instances int, k learner.Knobs) *distSim {
	t.Helper()
	slots := instances * len(spec.Agents)
	tr, err := Factory{}.NewTrainer(spec, workers*slots, k)
	if err != nil {
		t.Fatal(err)
	}
	s := &distSim{trainer: tr}
	for w := range workers {
		kw := k
		kw.Seed = k.Seed*1000 + uint64(w) + 1
		a, err := Factory{}.NewActor(open(instances), kw)
		if err != nil {
			t.Fatal(err)
		}
		s.actors = append(s.actors, a)
	}
	return s
}

// collect is every actor's fragment of the trainer's current weights.
func (s *distSim) collect(t testing.TB) [][]byte {
	t.Helper()
	w, err := s.trainer.Weights()
	if err != nil {
		t.Fatal(err)
	}
	var frags [][]byte
	for i, a := range s.actors {
		f, _, err := a.Collect(context.Background(), w, i, "node")
		if err != nil {
			t.Fatal(err)
		}
		frags = append(frags, f)
	}
	return frags
}

func (s *distSim) iterate(t testing.TB) learner.Metrics {
	t.Helper()
	m, err := s.trainer.Learn(context.Background(), s.collect(t))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMultiAgentLearnsFromFragments: multi-agent PPO with rollout workers.
// The trainer learns each trained policy from its agents' experience on
// every worker, leaves a script and a frozen policy alone, reports every
// policy's numbers and the joint actions, refuses fragments that do not
// add up, and its checkpoint restores to the same trainer.
func TestMultiAgentLearnsFromFragments(t *testing.T) {
	frozen := &learner.MultiAgent{
		Policies: map[string]learner.Policy{"learner": {}, "still": {}},
		Mapping:  map[string]string{"agent_0": "learner", "agent_1": "still"},
		Train:    []string{"learner"},
	}
	for name, ma := range map[string]*learner.MultiAgent{"versus tft": versusTFT, "two policies": twoPolicies, "frozen": frozen, "shared": nil, "league": league} {
		t.Run(name, func(t *testing.T) {
			k := learner.Knobs{Seed: 3, Workers: 2, EpisodeLength: 32, MultiAgent: ma}
			s := newDistSim(t, ipd.Spec(), func(n int) envs.VecEnv { return ipdEnv(t, n) }, 2, 3, k)
			mt := s.trainer.(*multiTrainer)
			before := map[string][]float64{}
			for _, p := range mt.pols {
				if p.l != nil {
					before[p.name] = p.l.Params()
				}
			}
			var m learner.Metrics
			for range 3 {
				m = s.iterate(t)
			}
			// 2 workers × 3 games × 32 steps a game per iteration.
			if m.Iteration != 3 || m.Timesteps != 3*2*3*32 || len(m.Rollouts) != 2 || m.Rollouts[1].Worker != 1 || m.Rollouts[0].WeightVersion != 2 {
				t.Fatalf("metrics %+v", m)
			}
			var joint float64
			for a := range 4 {
				joint += m.Values["joint_action/"+[]string{"0_0", "0_1", "1_0", "1_1"}[a]+"_rate"]
			}
			if math.Abs(joint-1) > 1e-9 {
				t.Fatalf("joint action rates add up to %v", joint)
			}
			for _, p := range mt.pols {
				pre := "policy/" + p.name + "/"
				if _, ok := m.Values[pre+"recent_return_mean"]; !ok {
					t.Fatalf("no %srecent_return_mean in %v", pre, m.Values)
				}
				if p.l == nil {
					continue
				}
				changed := !sameBits(before[p.name], p.l.Params())
				if changed != p.train {
					t.Fatalf("policy %s (trained %v): weights changed %v", p.name, p.train, changed)
				}
				if _, ok := m.Values[pre+"policy_loss"]; ok != p.train {
					t.Fatalf("policy %s (trained %v) reports a policy loss: %v", p.name, p.train, ok)
				}
			}

			frags := s.collect(t)
			if _, err := s.trainer.Learn(context.Background(), frags[:1]); !errors.Is(err, ErrFragment) {
				t.Fatalf("one fragment of two: %v", err)
			}
			other := newDistSim(t, ipd.Spec(), func(n int) envs.VecEnv { return ipdEnv(t, n) }, 1, 3, learner.Knobs{Seed: 3, Workers: 1, EpisodeLength: 32, MultiAgent: &learner.MultiAgent{
				Policies: map[string]learner.Policy{"x": {}}, Mapping: map[string]string{"agent_*": "x"}}})
			if name != "shared" {
				if _, err := s.trainer.Learn(context.Background(), [][]byte{frags[0], other.collect(t)[0]}); !errors.Is(err, ErrFragment) {
					t.Fatalf("a fragment of other policies: %v", err)
				}
			}

			var ck bytes.Buffer
			if err := s.trainer.Save(&ck); err != nil {
				t.Fatal(err)
			}
			r, err := Factory{}.RestoreTrainer(bytes.NewReader(ck.Bytes()), ipd.Spec(), 2*3*2)
			if err != nil {
				t.Fatal(err)
			}
			ma, err := s.trainer.Learn(context.Background(), frags)
			if err != nil {
				t.Fatal(err)
			}
			mb, err := r.Learn(context.Background(), frags)
			if err != nil {
				t.Fatal(err)
			}
			for key, v := range ma.Values {
				if !isTiming(key) && mb.Values[key] != v {
					t.Fatalf("%s = %v after the restore, %v without", key, mb.Values[key], v)
				}
			}
			if ma.Iteration != mb.Iteration || ma.Timesteps != mb.Timesteps {
				t.Fatalf("counters differ: %+v vs %+v", ma, mb)
			}
		})
	}
}

// TestMaskedFragments: a masked env's fragment carries each step's legal
// actions, so the trainer's update masks the logits the actor did
// (LandmarkSpread-v0, one policy shared by its agents, two workers).
func TestMaskedFragments(t *testing.T) {
	open := func(n int) envs.VecEnv {
		env, err := multiagent.New(spread.Spec(), spread.Agents*n, func() multiagent.Env { return &spread.Env{} })
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	s := newDistSim(t, spread.Spec(), open, 2, 2, learner.Knobs{Seed: 1, Workers: 1, EpisodeLength: 25})
	frags := s.collect(t)
	_, parts, err := s.trainer.(*multiTrainer).decodeFragment(frags[0])
	if err != nil {
		t.Fatal(err)
	}
	f, err := DecodeFragment(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	n := spread.Spec().Action.N
	if f.MaskDim != n || len(f.Mask) != f.NumSteps*f.NumEnvs*n {
		t.Fatalf("mask_dim %d with %d mask values for %d×%d steps", f.MaskDim, len(f.Mask), f.NumSteps, f.NumEnvs)
	}
	illegal := 0
	for _, legal := range f.Mask {
		if !legal {
			illegal++
		}
	}
	if illegal == 0 {
		t.Fatal("no step had an illegal action: the mask was not recorded")
	}
	for i := 0; i < f.NumSteps*f.NumEnvs; i++ {
		if a := int(f.Actions[i]); !f.Mask[i*n+a] {
			t.Fatalf("step %d took action %d, which its mask forbids", i, a)
		}
	}
	l := s.trainer.(*multiTrainer).pols[0].l
	if _, err := s.trainer.Learn(context.Background(), frags); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.buf.mask[:f.NumEnvs*n], f.Mask[:f.NumEnvs*n]) {
		t.Fatal("the trainer's update did not take worker 0's masks")
	}
	f.MaskDim, f.Mask = 0, nil
	b, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Learn(context.Background(), []*Fragment{mustDecode(t, b), mustDecode(t, parts[0])}); !errors.Is(err, ErrFragment) {
		t.Fatalf("a masked env's fragment without masks: %v", err)
	}
}

func mustDecode(t testing.TB, b []byte) *Fragment {
	t.Helper()
	f, err := DecodeFragment(b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// FuzzMultiAgentFragment: a trainer given any bytes as a worker's
// multi-agent fragment refuses them with ErrFragment or learns from them;
// it never panics or allocates what the bytes claim.
func FuzzMultiAgentFragment(f *testing.F) {
	k := learner.Knobs{Seed: 3, Workers: 1, EpisodeLength: 8, MultiAgent: versusTFT}
	s := newDistSim(f, ipd.Spec(), func(n int) envs.VecEnv { return ipdEnv(f, n) }, 1, 2, k)
	good := s.collect(f)[0]
	f.Add(good[:len(good)-sha256.Size])
	f.Add([]byte(multiFragMagic + "\x01\x00\x00\x00\x02\x00\x00\x00{}"))
	f.Add([]byte(multiFragMagic + "\x01\x00\x00\x00\x40\x00\x00\x00" + `{"slots":4,"policies":[{"name":"learner","learned":true},{"name":"tft"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		sum := sha256.Sum256(body)
		data := append(bytes.Clone(body), sum[:]...)
		tr, err := Factory{}.NewTrainer(ipd.Spec(), 4, k)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Learn(context.Background(), [][]byte{data}); err != nil && !errors.Is(err, ErrFragment) {
			t.Fatalf("error not ErrFragment: %v", err)
		}
	})
}
