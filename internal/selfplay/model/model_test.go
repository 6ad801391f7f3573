package model

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/trainyard/trainyard/internal/selfplay"
)

func testShape() Shape { return Shape{ObsDim: 12, Actions: 5, Players: 3, Hidden: []int{16}} }

func TestEvaluate(t *testing.T) {
	m, err := New(testShape(), 1)
	if err != nil {
		t.Fatal(err)
	}
	legal := []bool{true, false, true, true, false}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) { // concurrent use: run with -race
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 0))
			for k := 0; k < 50; k++ {
				obs := make([]float32, 12)
				for i := range obs {
					obs[i] = rng.Float32()
				}
				pri, val := make([]float32, 5), make([]float32, 3)
				if err := m.Evaluate(obs, legal, pri, val); err != nil {
					t.Error(err)
					return
				}
				sum := float32(0)
				for a, p := range pri {
					if (p > 0) != legal[a] {
						t.Errorf("prior %v on action %d (legal %v)", p, a, legal[a])
					}
					sum += p
				}
				if math.Abs(float64(sum-1)) > 1e-5 {
					t.Errorf("priors sum to %v", sum)
				}
				for _, v := range val {
					if v <= -1 || v >= 1 {
						t.Errorf("value %v outside (-1,1)", v)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	if err := m.Evaluate(make([]float32, 3), legal, make([]float32, 5), make([]float32, 3)); err == nil {
		t.Error("wrong obs size accepted")
	}
	if err := m.Evaluate(make([]float32, 12), make([]bool, 5), make([]float32, 5), make([]float32, 3)); err == nil {
		t.Error("no legal action accepted")
	}
}

// synthetic is a learnable task: the best action is the index of the
// largest of the first five inputs; the value is input 5's sign.
func synthetic(n int, seed uint64) Examples {
	rng := rand.New(rand.NewPCG(seed, 9))
	var e Examples
	for i := 0; i < n; i++ {
		s := make([]float32, 12)
		for j := range s {
			s[j] = rng.Float32()*2 - 1
		}
		best := 0
		for a := 1; a < 5; a++ {
			if s[a] > s[best] {
				best = a
			}
		}
		pi := make([]float32, 5)
		pi[best] = 1
		v := float32(1)
		if s[5] < 0 {
			v = -1
		}
		e.States = append(e.States, s)
		e.Policies = append(e.Policies, pi)
		e.Values = append(e.Values, v)
		e.ToMove = append(e.ToMove, i%3)
		e.Outcomes = append(e.Outcomes, []float32{v, -v, -v})
	}
	return e
}

func TestTrain(t *testing.T) {
	ex := synthetic(2000, 1)
	m, _ := New(testShape(), 3)
	before, err := Train(m.Clone(), ex, HParams{Epochs: 1, LR: 1e-12, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	after, err := Train(m, ex, HParams{Epochs: 30, LR: 3e-3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("untrained %+v, trained %+v", before, after)
	if after.PolicyLoss > 0.5*before.PolicyLoss || after.ValueLoss > 0.5*before.ValueLoss {
		t.Fatalf("losses did not halve: before %+v after %+v", before, after)
	}
	// Held-out accuracy of the policy and the value sign.
	test := synthetic(500, 2)
	pri, val := make([]float32, 5), make([]float32, 3)
	all := []bool{true, true, true, true, true}
	right, vright := 0, 0
	for i := range test.States {
		if err := m.Evaluate(test.States[i], all, pri, val); err != nil {
			t.Fatal(err)
		}
		if pri[argmax(pri)] > 0 && test.Policies[i][argmax(pri)] == 1 {
			right++
		}
		if (val[0] > 0) == (test.Values[i] > 0) && (val[1] > 0) == (test.Values[i] < 0) {
			vright++
		}
	}
	t.Logf("held-out policy accuracy %d/500, value sign %d/500", right, vright)
	if right < 400 || vright < 450 {
		t.Fatalf("held-out accuracy policy %d/500, value %d/500", right, vright)
	}
	// Same inputs, same model.
	a, _ := New(testShape(), 3)
	b, _ := New(testShape(), 3)
	for _, x := range []*Model{a, b} {
		if _, err := Train(x, ex, HParams{Epochs: 2, Seed: 5}); err != nil {
			t.Fatal(err)
		}
	}
	ab, _ := a.Marshal()
	bb, _ := b.Marshal()
	if !bytes.Equal(ab, bb) {
		t.Fatal("training is not deterministic")
	}
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

func TestTrainRejects(t *testing.T) {
	m, _ := New(testShape(), 1)
	ex := synthetic(10, 1)
	bad := ex
	bad.States = append([][]float32{make([]float32, 3)}, ex.States[1:]...)
	tests := []struct {
		name string
		ex   Examples
	}{
		{"empty", Examples{}},
		{"state size", bad},
		{"lengths", Examples{States: ex.States, Policies: ex.Policies[:3], Values: ex.Values}},
	}
	for _, tc := range tests {
		if _, err := Train(m, tc.ex, HParams{}); err == nil {
			t.Errorf("%s: trained", tc.name)
		}
	}
}

func TestMarshal(t *testing.T) {
	m, _ := New(testShape(), 4)
	m.Name = "square8_2p-g1"
	if _, err := Train(m, synthetic(100, 1), HParams{Epochs: 1}); err != nil {
		t.Fatal(err)
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := got.Marshal()
	if !bytes.Equal(b, b2) || got.Name != m.Name || got.Steps() != m.Steps() || got.Shape().Actions != 5 {
		t.Fatal("marshal does not round-trip")
	}
	obs := synthetic(1, 3).States[0]
	all := []bool{true, true, true, true, true}
	p1, v1, p2, v2 := make([]float32, 5), make([]float32, 3), make([]float32, 5), make([]float32, 3)
	_ = m.Evaluate(obs, all, p1, v1)
	_ = got.Evaluate(obs, all, p2, v2)
	for i := range p1 {
		if p1[i] != p2[i] {
			t.Fatal("unmarshalled model evaluates differently")
		}
	}
	corrupt := func(f func([]byte) []byte) []byte { return f(bytes.Clone(b)) }
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"truncated", b[:len(b)-40]},
		{"flipped weight", corrupt(func(c []byte) []byte { c[len(c)-100] ^= 1; return c })},
		{"magic", corrupt(func(c []byte) []byte { c[0] = 'X'; return c })},
	}
	for _, tc := range tests {
		if _, err := Unmarshal(tc.b); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", tc.name, err)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	m, _ := New(Shape{ObsDim: 3, Actions: 2, Players: 2, Hidden: []int{2}}, 1)
	b, _ := m.Marshal()
	f.Add(b)
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Unmarshal(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		if _, err := m.Marshal(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestExamplesFrom(t *testing.T) {
	games := []selfplay.Game{{
		Players: 3, Outcome: []float32{-1, 1, -1}, Terminal: true,
		Moves: []selfplay.Move{
			{Player: 0, Action: 1, State: []float32{1}, Policy: []float32{0, 1}},
			{Player: 1, Action: 0, State: []float32{2}, Policy: []float32{1, 0}},
			{Player: 2, Action: 0, State: []float32{3}, Policy: []float32{1, 0}},
		},
	}}
	e := ExamplesFrom(games)
	if e.Len() != 3 || e.Values[1] != 1 || e.Values[2] != -1 || e.ToMove[2] != 2 || e.States[1][0] != 2 {
		t.Fatalf("examples %+v", e)
	}
	// Outcomes are relative to the mover: seat 2's next player is seat 0.
	if o := e.Outcomes[2]; o[0] != -1 || o[1] != -1 || o[2] != 1 {
		t.Fatalf("relative outcomes of seat 2: %v", o)
	}
}

func TestValueTargetWithoutOutcomes(t *testing.T) {
	tests := []struct {
		players int
		v       float32
		want    []float32
	}{
		{2, 1, []float32{1, -1}},
		{2, -1, []float32{-1, 1}},
		{2, 0, []float32{0, 0}},
		{3, 1, []float32{1, -1, -1}},
		{3, -1, []float32{-1, 0, 0}}, // one of two others won: each expects 0
		{4, -1, []float32{-1, -1.0 / 3, -1.0 / 3, -1.0 / 3}},
		{4, 0, []float32{0, 0, 0, 0}},
	}
	for _, tc := range tests {
		target, trained := make([]float32, tc.players), make([]bool, tc.players)
		valueTarget(Examples{Values: []float32{tc.v}}, 0, tc.players, target, trained)
		for k := range target {
			if math.Abs(float64(target[k]-tc.want[k])) > 1e-6 || !trained[k] {
				t.Errorf("%d players, v=%v: targets %v, want %v", tc.players, tc.v, target, tc.want)
				break
			}
		}
	}
}
