package ppo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/native"
	"github.com/trainyard/trainyard/sdk/go/envs/pendulum"
)

func newEnv(t testing.TB, name string, n int) envs.VecEnv {
	t.Helper()
	env, err := native.New(name, n)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// smallConfig keeps unit tests fast: short rollouts, few epochs, small
// networks.
func smallConfig(name string, workers int) Config {
	c := ConfigFor(name)
	c.Seed = 7
	c.NumSteps, c.MinibatchSize, c.Epochs = 16, 20, 3
	c.Hidden = []int{16, 8}
	c.Workers = workers
	c.EntropyCoef = 0.05
	c.InitLogStd = -0.3
	c.NormalizeReward = name == pendulum.Name
	return c
}

// referenceLoss evaluates the minibatch loss from its definition, sample by
// sample, without any of the gradient code.
func referenceLoss(l *Learner, params []float64, idx []int, clip float64) float64 {
	b := &l.buf
	var mean, sq float64
	for _, k := range idx {
		mean += b.advantages[k]
	}
	mean /= float64(len(idx))
	for _, k := range idx {
		sq += (b.advantages[k] - mean) * (b.advantages[k] - mean)
	}
	std := math.Sqrt(sq / float64(len(idx)-1))
	piWS, vfWS := l.pi.NewWorkspace(1), l.vf.NewWorkspace(1)
	var total float64
	for _, k := range idx {
		x := b.obs[k*l.od : (k+1)*l.od]
		out := l.pi.Forward(params[l.piOff:l.vfOff], piWS, x, 1)
		v := l.vf.Forward(params[l.vfOff:l.stdOff], vfWS, x, 1)[0]
		var logp, ent float64
		if l.discrete {
			var z float64
			for _, o := range out {
				z += math.Exp(o)
			}
			a := int(b.actions[k])
			logp = out[a] - math.Log(z)
			for _, o := range out {
				p := math.Exp(o) / z
				ent -= p * math.Log(p)
			}
		} else {
			for d, mu := range out {
				sigma := math.Exp(params[l.stdOff+d])
				a := b.actions[k*l.ad+d]
				logp += -(a-mu)*(a-mu)/(2*sigma*sigma) - math.Log(sigma) - 0.5*math.Log(2*math.Pi)
				ent += 0.5 * math.Log(2*math.Pi*math.E*sigma*sigma)
			}
		}
		adv := (b.advantages[k] - mean) / (std + 1e-8)
		r := math.Exp(logp - b.logp[k])
		surr := math.Min(r*adv, math.Max(math.Min(r, 1+clip), 1-clip)*adv)
		total += -surr - l.cfg.EntropyCoef*ent + l.cfg.ValueCoef*0.5*(v-b.returns[k])*(v-b.returns[k])
	}
	return total / float64(len(idx))
}

func TestLossGradientMatchesFiniteDifferences(t *testing.T) {
	tests := []struct {
		env     string
		workers int
	}{
		{cartpole.Name, 1}, {cartpole.Name, 3}, {pendulum.Name, 1}, {pendulum.Name, 2},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/workers=%d", tc.env, tc.workers), func(t *testing.T) {
			l, err := New(newEnv(t, tc.env, 3), smallConfig(tc.env, tc.workers))
			if err != nil {
				t.Fatal(err)
			}
			var m Metrics
			if err := l.collect(context.Background(), &m); err != nil {
				t.Fatal(err)
			}
			l.computeGAE()
			// Move the policy away from the one that collected the data so
			// ratios spread and some are clipped.
			rng := rand.New(rand.NewPCG(1, 1))
			for i := l.piOff; i < l.vfOff; i++ {
				l.params[i] += 0.15 * rng.NormFloat64()
			}
			for i := l.stdOff; i < len(l.params); i++ {
				l.params[i] += 0.2
			}
			idx := rng.Perm(len(l.perm))[:20]
			const clip = 0.2
			st := l.minibatch(idx, clip)
			if st.clip == 0 || st.clip == 1 {
				t.Fatalf("clip fraction %v: both branches must be exercised", st.clip)
			}
			if want := referenceLoss(l, l.params, idx, clip); math.Abs(st.pg-l.cfg.EntropyCoef*st.ent+l.cfg.ValueCoef*st.v-want) > 1e-9 {
				t.Fatalf("minibatch loss %v, reference %v", st.pg-l.cfg.EntropyCoef*st.ent+l.cfg.ValueCoef*st.v, want)
			}
			const h = 1e-6
			checked := 0
			for i := range l.params {
				if i%5 != 0 && i < l.stdOff {
					continue
				}
				orig := l.params[i]
				l.params[i] = orig + h
				lp := referenceLoss(l, l.params, idx, clip)
				l.params[i] = orig - h
				lm := referenceLoss(l, l.params, idx, clip)
				l.params[i] = orig
				fd := (lp - lm) / (2 * h)
				if math.Abs(fd-l.grad[i]) > 1e-6*math.Max(1, math.Abs(fd)) {
					t.Fatalf("param %d (policy < %d, value < %d): gradient %.9g, finite difference %.9g", i, l.vfOff, l.stdOff, l.grad[i], fd)
				}
				checked++
			}
			if checked < 50 {
				t.Fatalf("only %d parameters checked", checked)
			}
		})
	}
}

// run iterates l k times and returns the metrics with timing zeroed.
func run(t *testing.T, l *Learner, k int) []Metrics {
	t.Helper()
	var ms []Metrics
	for range k {
		m, err := l.Iterate(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		m.StepsPerSecond, m.RolloutStepsPerSecond = 0, 0
		ms = append(ms, m)
	}
	return ms
}

func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// TestResumeNeitherResetsCountersNorDrifts (RLlib restores that reset
// timestep counters or start from epoch 1) is issue 10's "resume means the whole
// state": interrupt at iteration k, restore into a fresh learner and a
// fresh env, continue to m; the weights, optimizer and metrics must equal
// an uninterrupted run's bit for bit, and the counters must continue.
func TestResumeNeitherResetsCountersNorDrifts(t *testing.T) {
	const k, m = 3, 6
	for _, name := range []string{cartpole.Name, pendulum.Name} {
		t.Run(name, func(t *testing.T) {
			cfg := smallConfig(name, 2)
			straight, err := New(newEnv(t, name, 4), cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := run(t, straight, m)

			first, err := New(newEnv(t, name, 4), cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := run(t, first, k)
			var ckpt bytes.Buffer
			if err := first.Save(&ckpt); err != nil {
				t.Fatal(err)
			}
			// A fresh env in a different state, as on another node.
			fresh := newEnv(t, name, 4)
			if err := fresh.Reset(12345, make([]float32, 4*fresh.Spec().Observation.Dim())); err != nil {
				t.Fatal(err)
			}
			resumed, err := Restore(&ckpt, fresh)
			if err != nil {
				t.Fatal(err)
			}
			if it, ts := resumed.Counters(); it != k || ts != int64(k*cfg.NumSteps*4) {
				t.Fatalf("restored counters (%d, %d), want (%d, %d)", it, ts, k, k*cfg.NumSteps*4)
			}
			got = append(got, run(t, resumed, m-k)...)
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) { // Metrics holds a slice (Rollouts)
					t.Fatalf("iteration %d metrics differ:\n resumed  %+v\n straight %+v", i+1, got[i], want[i])
				}
				if i > 0 && (got[i].Iteration <= got[i-1].Iteration || got[i].Timesteps <= got[i-1].Timesteps) {
					t.Fatalf("counters not monotone at %d: %+v after %+v", i, got[i], got[i-1])
				}
			}
			if !sameBits(resumed.params, straight.params) || !sameBits(resumed.adam.M, straight.adam.M) || !sameBits(resumed.adam.V, straight.adam.V) {
				t.Fatal("weights or Adam moments differ from the uninterrupted run")
			}
			if resumed.adam.Step != straight.adam.Step {
				t.Fatalf("Adam step %d, want %d", resumed.adam.Step, straight.adam.Step)
			}
		})
	}
}

func TestSameSeedSameRunDifferentSeedDifferentRun(t *testing.T) {
	cfg := smallConfig(cartpole.Name, 2)
	a, _ := New(newEnv(t, cartpole.Name, 4), cfg)
	b, _ := New(newEnv(t, cartpole.Name, 4), cfg)
	cfg.Seed++
	c, _ := New(newEnv(t, cartpole.Name, 4), cfg)
	run(t, a, 2)
	run(t, b, 2)
	run(t, c, 2)
	if !sameBits(a.Params(), b.Params()) {
		t.Fatal("same seed gave different weights")
	}
	if sameBits(a.Params(), c.Params()) {
		t.Fatal("different seeds gave identical weights")
	}
}

// hidden hides a VecEnv's Snapshotter, like a plugin without snapshots.
type hidden struct{ envs.VecEnv }

func TestRestoreWithoutEnvSnapshotStartsFreshEpisodes(t *testing.T) {
	cfg := smallConfig(cartpole.Name, 1)
	l, _ := New(hidden{newEnv(t, cartpole.Name, 2)}, cfg)
	run(t, l, 2)
	var ckpt bytes.Buffer
	if err := l.Save(&ckpt); err != nil {
		t.Fatal(err)
	}
	r, err := Restore(&ckpt, hidden{newEnv(t, cartpole.Name, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(r.params, l.params) {
		t.Fatal("weights not restored")
	}
	for i, v := range r.epRet {
		if v != 0 || r.epLen[i] != 0 {
			t.Fatal("unfinished episodes carried over without the env state")
		}
	}
	ms := run(t, r, 1)
	if ms[0].Iteration != 3 || ms[0].Timesteps != 3*int64(cfg.NumSteps)*2 {
		t.Fatalf("counters after resume: %+v", ms[0])
	}
}

func TestRestoreRejects(t *testing.T) {
	cfg := smallConfig(cartpole.Name, 1)
	l, _ := New(newEnv(t, cartpole.Name, 2), cfg)
	run(t, l, 1)
	var buf bytes.Buffer
	if err := l.Save(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	flip := func(at int) []byte {
		b := bytes.Clone(good)
		b[at] ^= 0x10
		return b
	}
	resum := func(b []byte) []byte { // a structurally bad file with a valid checksum
		body := b[:len(b)-32]
		sum := sha256.Sum256(body)
		return append(bytes.Clone(body), sum[:]...)
	}
	newVersion := bytes.Clone(good)
	newVersion[8] = 9
	tests := []struct {
		name string
		data []byte
		env  envs.VecEnv
		want string
	}{
		{"flipped weight bit", flip(len(good) - 100), newEnv(t, cartpole.Name, 2), "sha256"},
		{"flipped header bit", flip(40), newEnv(t, cartpole.Name, 2), "sha256"},
		{"truncated", good[:len(good)-1], newEnv(t, cartpole.Name, 2), "sha256"},
		{"empty", nil, newEnv(t, cartpole.Name, 2), "not a PPO checkpoint"},
		{"future version", resum(newVersion), newEnv(t, cartpole.Name, 2), "version 9"},
		{"other env", good, newEnv(t, pendulum.Name, 2), "CartPole-v1"},
		{"other size", good, newEnv(t, cartpole.Name, 3), "2 × CartPole-v1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Restore(bytes.NewReader(tc.data), tc.env)
			if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrCheckpoint mentioning %q", err, tc.want)
			}
		})
	}
}

func TestMetricsAreConsistent(t *testing.T) {
	cfg := smallConfig(cartpole.Name, 2)
	cfg.NumSteps = 64
	l, _ := New(newEnv(t, cartpole.Name, 4), cfg)
	for i, m := range run(t, l, 3) {
		if m.Iteration != int64(i+1) || m.Timesteps != int64((i+1)*64*4) {
			t.Fatalf("counters %+v", m)
		}
		if m.Episodes == 0 {
			t.Fatalf("iteration %d: no episode finished in 64 steps of an untrained CartPole", i+1)
		}
		if !(m.EpisodeReturnMin <= m.EpisodeReturnMean && m.EpisodeReturnMean <= m.EpisodeReturnMax) || m.EpisodeReturnMin < 1 {
			t.Fatalf("returns min/mean/max %v/%v/%v", m.EpisodeReturnMin, m.EpisodeReturnMean, m.EpisodeReturnMax)
		}
		if m.ApproxKL < 0 || m.ClipFraction < 0 || m.ClipFraction > 1 || m.Entropy <= 0 || m.Entropy > math.Ln2 || m.ValueLoss <= 0 {
			t.Fatalf("diagnostics out of range: %+v", m)
		}
		if m.Minibatches != cfg.Epochs*((64*4+cfg.MinibatchSize-1)/cfg.MinibatchSize) {
			t.Fatalf("minibatches %d", m.Minibatches)
		}
		if m.RecentEpisodes == 0 || m.RecentReturnMean < 1 {
			t.Fatalf("recent returns: %+v", m)
		}
	}
}

func TestIterateStopsOnCancel(t *testing.T) {
	l, _ := New(newEnv(t, cartpole.Name, 2), smallConfig(cartpole.Name, 1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Iterate(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestRolloutDoesNotAllocate(t *testing.T) {
	for _, name := range []string{cartpole.Name, pendulum.Name} {
		l, _ := New(newEnv(t, name, 8), smallConfig(name, 1))
		var m Metrics
		ctx := context.Background()
		if a := testing.AllocsPerRun(5, func() {
			if err := l.collect(ctx, &m); err != nil {
				t.Fatal(err)
			}
			l.computeGAE()
		}); a != 0 {
			t.Fatalf("%s: rollout allocates %v times", name, a)
		}
	}
}

// spaceEnv only declares spaces, to check which New accepts.
type spaceEnv struct {
	envs.VecEnv
	spec envs.Spec
}

func (s spaceEnv) Spec() envs.Spec { return s.spec }
func (s spaceEnv) NumEnvs() int    { return 1 }

func TestNewRejects(t *testing.T) {
	box := envs.Space{Kind: envs.Box, Shape: []int{2}, Low: []float32{-1, -1}, High: []float32{1, 1}}
	tests := []struct {
		name string
		spec envs.Spec
		cfg  func(*Config)
		want string
	}{
		{"multi-discrete actions", envs.Spec{Observation: box, Action: envs.Space{Kind: envs.MultiDiscrete, Nvec: []int{2, 2}}}, nil, "unsupported"},
		{"discrete observations", envs.Spec{Observation: envs.Space{Kind: envs.Discrete, N: 3}, Action: box}, nil, "need box"},
		{"box without bounds", envs.Spec{Observation: box, Action: envs.Space{Kind: envs.Box, Shape: []int{2}}}, nil, "bounds"},
		{"one action", envs.Spec{Observation: box, Action: envs.Space{Kind: envs.Discrete, N: 1}}, nil, "n = 1"},
		{"zero epochs", envs.Spec{Observation: box, Action: box}, func(c *Config) { c.Epochs = 0 }, "epochs"},
		{"gamma above 1", envs.Spec{Observation: box, Action: box}, func(c *Config) { c.Gamma = 1.5 }, "gamma"},
		{"NaN learning rate", envs.Spec{Observation: box, Action: box}, func(c *Config) { c.LearningRate = math.NaN() }, "learning_rate"},
		{"infinite entropy coefficient", envs.Spec{Observation: box, Action: box}, func(c *Config) { c.EntropyCoef = math.Inf(1) }, "entropy_coef"},
		{"huge hidden layer", envs.Spec{Observation: box, Action: box}, func(c *Config) { c.Hidden = []int{1 << 30} }, "hidden"},
		{"no workers", envs.Spec{Observation: box, Action: box}, func(c *Config) { c.Workers = 0 }, "workers"},
		{"zero hidden", envs.Spec{Observation: box, Action: box}, func(c *Config) { c.Hidden = []int{0} }, "hidden"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			_, err := New(spaceEnv{spec: tc.spec}, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestEvaluateCountsEpisodesPerEnv(t *testing.T) {
	l, _ := New(newEnv(t, cartpole.Name, 2), smallConfig(cartpole.Name, 1))
	res, err := l.Evaluate(context.Background(), newEnv(t, cartpole.Name, 3), 5, 7)
	if err != nil {
		t.Fatal(err)
	}
	// ceil(7/3) = 3 episodes from each of 3 envs.
	if res.Episodes != 9 || res.ReturnMin < 1 || res.ReturnMax > 500 || res.ReturnMean < res.ReturnMin || res.ReturnMean > res.ReturnMax {
		t.Fatalf("eval %+v", res)
	}
	again, _ := l.Evaluate(context.Background(), newEnv(t, cartpole.Name, 3), 5, 7)
	if again != res {
		t.Fatalf("evaluation is not deterministic: %+v then %+v", res, again)
	}
	if _, err := l.Evaluate(context.Background(), newEnv(t, pendulum.Name, 1), 5, 1); err == nil {
		t.Fatal("evaluated CartPole's policy on Pendulum")
	}
}

func TestActIsTheModeAndChecksSizes(t *testing.T) {
	for _, name := range []string{cartpole.Name, pendulum.Name} {
		l, _ := New(newEnv(t, name, 2), smallConfig(name, 1))
		run(t, l, 1)
		od := l.od
		obs := l.obs[:2*od]
		acts := make([]float32, 2*l.ad)
		if err := l.Act(obs, acts); err != nil {
			t.Fatal(err)
		}
		x := make([]float64, 2*od)
		l.normalizeObs(x, obs, 2)
		out := l.pi.Forward(l.params[l.piOff:l.vfOff], l.pi.NewWorkspace(2), x, 2)
		for i := 0; i < 2; i++ {
			o := out[i*l.nAct : (i+1)*l.nAct]
			if l.discrete {
				if o[int(acts[i])] < o[1-int(acts[i])] {
					t.Fatalf("%s: action %v is not the argmax of %v", name, acts[i], o)
				}
			} else if want := min(max(float32(o[0]), -2), 2); acts[i] != want {
				t.Fatalf("%s: action %v, want the clipped mean %v", name, acts[i], want)
			}
		}
		if err := l.Act(obs[:od+1], acts); err == nil {
			t.Fatalf("%s: Act accepted a partial observation", name)
		}
	}
}
