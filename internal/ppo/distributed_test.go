package ppo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/pendulum"
)

// simWorkers is a trainer and k actors of e envs each, all in one process:
// what the distributed mode does over S3, without S3.
type simWorkers struct {
	trainer *Learner
	actors  []*Learner
	gen     string
}

func newSim(t testing.TB, name string, cfg Config, k, e int) *simWorkers {
	t.Helper()
	probe := newEnv(t, name, 1)
	tr, err := NewTrainer(probe.Spec(), k*e, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &simWorkers{trainer: tr, gen: "g1"}
	for w := range k {
		c := cfg
		c.Seed = cfg.Seed*1000 + uint64(w) + 1
		a, err := NewActor(newEnv(t, name, e), c)
		if err != nil {
			t.Fatal(err)
		}
		s.actors = append(s.actors, a)
	}
	return s
}

// iterate publishes the trainer's weights (through their encoding), lets
// every actor collect a fragment (through its encoding) and learns.
func (s *simWorkers) iterate(t testing.TB) Metrics {
	t.Helper()
	raw, err := s.trainer.Weights(s.gen).Encode()
	if err != nil {
		t.Fatal(err)
	}
	w, err := DecodeWeights(raw)
	if err != nil {
		t.Fatal(err)
	}
	var frags []*Fragment
	for i, a := range s.actors {
		f, err := a.Collect(context.Background(), w, i, "node")
		if err != nil {
			t.Fatal(err)
		}
		b, err := f.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if f, err = DecodeFragment(b); err != nil {
			t.Fatal(err)
		}
		frags = append(frags, f)
	}
	m, err := s.trainer.Learn(context.Background(), frags)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFragmentRoundTrip(t *testing.T) {
	for _, name := range []string{cartpole.Name, pendulum.Name} {
		cfg := smallConfig(name, 1)
		s := newSim(t, name, cfg, 1, 3)
		w := s.trainer.Weights("gen")
		f, err := s.actors[0].Collect(context.Background(), w, 0, "node-a")
		if err != nil {
			t.Fatal(err)
		}
		if f.Iteration != 1 || f.WeightVersion != 0 || f.Generation != "gen" || f.Node != "node-a" || f.NumEnvs != 3 || f.NumSteps != cfg.NumSteps {
			t.Fatalf("%s: header %+v", name, f)
		}
		b, err := f.Encode()
		if err != nil {
			t.Fatal(err)
		}
		g, err := DecodeFragment(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f, g) {
			t.Fatalf("%s: fragment changed in a round trip", name)
		}
		if name == pendulum.Name && (g.RetStats.Count == 0 || len(g.ObsStats.Mean) != 3) {
			t.Fatalf("pendulum fragment lacks statistics: %+v %+v", g.ObsStats, g.RetStats)
		}
		wb, _ := w.Encode()
		w2, err := DecodeWeights(wb)
		if err != nil || !reflect.DeepEqual(w, w2) {
			t.Fatalf("%s: weights round trip: %v", name, err)
		}
		// Any flipped bit or truncation is caught.
		for _, bad := range [][]byte{b[:len(b)-1], nil, append(bytes.Clone(b[:20]), 0xFF)} {
			if _, err := DecodeFragment(bad); !errors.Is(err, ErrFragment) {
				t.Fatalf("%s: corrupt fragment: %v", name, err)
			}
		}
		c := bytes.Clone(b)
		c[len(c)/2] ^= 1
		if _, err := DecodeFragment(c); !errors.Is(err, ErrFragment) {
			t.Fatalf("%s: flipped bit: %v", name, err)
		}
	}
}

// TestLearnFromFragmentsMatchesShapes: a trainer's first weights are New's,
// Learn counts steps and iterations like Iterate, and refuses fragments
// that do not add up to its envs.
func TestLearnFromFragmentsCounts(t *testing.T) {
	cfg := smallConfig(cartpole.Name, 2)
	inProc, _ := New(newEnv(t, cartpole.Name, 4), cfg)
	s := newSim(t, cartpole.Name, cfg, 2, 2)
	if !sameBits(inProc.Params(), s.trainer.Params()) {
		t.Fatal("a trainer starts from other weights than the in-process learner")
	}
	before := s.trainer.Params()
	var m Metrics
	for range 3 {
		m = s.iterate(t)
	}
	if m.Iteration != 3 || m.Timesteps != int64(3*cfg.NumSteps*4) || len(m.Rollouts) != 2 || m.Rollouts[1].Worker != 1 || m.Rollouts[0].WeightVersion != 2 {
		t.Fatalf("metrics %+v", m)
	}
	if sameBits(before, s.trainer.Params()) {
		t.Fatal("Learn did not change the weights")
	}
	for _, v := range []float64{m.PolicyLoss, m.ValueLoss, m.ApproxKL, m.RecentReturnMean} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("non-finite metric in %+v", m)
		}
	}
	w := s.trainer.Weights("g")
	f, _ := s.actors[0].Collect(context.Background(), w, 0, "")
	if _, err := s.trainer.Learn(context.Background(), []*Fragment{f}); !errors.Is(err, ErrFragment) {
		t.Fatalf("one fragment of two: %v", err)
	}
	// A checkpoint of the trainer restores onto SpecOnly and continues.
	var buf bytes.Buffer
	if err := s.trainer.Save(&buf); err != nil {
		t.Fatal(err)
	}
	r, err := Restore(&buf, SpecOnly(s.trainer.spec, 4))
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(r.Params(), s.trainer.Params()) {
		t.Fatal("restored trainer has other weights")
	}
	if _, err := (&Learner{}).Collect(context.Background(), w, 0, ""); err == nil {
		t.Fatal("Collect on a non-actor learner")
	}
}

// FuzzDecodeFragment: arbitrary bodies behind a valid checksum give an
// error or a fragment that encodes back to the same bytes, never a panic
// or an unbounded allocation.
func FuzzDecodeFragment(f *testing.F) {
	s := newSim(f, cartpole.Name, smallConfig(cartpole.Name, 1), 1, 2)
	fr, err := s.actors[0].Collect(context.Background(), s.trainer.Weights("g"), 0, "n")
	if err != nil {
		f.Fatal(err)
	}
	good, _ := fr.Encode()
	f.Add(good[:len(good)-sha256.Size])
	f.Add([]byte(fragMagic + "\x02\x00\x00\x00{}"))
	f.Add([]byte(fragMagic + "\x40\x00\x00\x00" + `{"num_envs":65536,"num_steps":1048576,"obs_dim":4,"act_dim":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		sum := sha256.Sum256(body)
		data := append(bytes.Clone(body), sum[:]...)
		fr, err := DecodeFragment(data)
		if err != nil {
			if !errors.Is(err, ErrFragment) {
				t.Fatalf("error not ErrFragment: %v", err)
			}
			return
		}
		if _, err := fr.Encode(); err != nil {
			t.Fatalf("decoded fragment does not encode: %v", err)
		}
	})
}
