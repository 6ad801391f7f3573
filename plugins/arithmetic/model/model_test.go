package model

import (
	"strings"
	"testing"

	"github.com/trainyard/trainyard/plugins/arithmetic/problem"
)

// TestModel: the logit decides how often answers are worked out (and
// right); bad weights are refused and change nothing.
func TestModel(t *testing.T) {
	rng := uint64(1)
	p := problem.Draw(&rng)
	for _, tc := range []struct {
		policy   string
		min, max int
	}{{`{"logit": -6}`, 0, 20}, {`{"logit": 0}`, 400, 600}, {`{"logit": 6, "step": 3}`, 980, 1000}} {
		m := New(1)
		if err := m.Load([]byte(tc.policy)); err != nil {
			t.Fatal(err)
		}
		right := 0
		for range 1000 {
			a := m.Answer(p.Prompt(0))
			if strings.Contains(a, "\n") {
				right++
			}
		}
		if right < tc.min || right > tc.max {
			t.Errorf("%s: %d of 1000 worked out, want %d..%d", tc.policy, right, tc.min, tc.max)
		}
	}
	m := New(1)
	for _, bad := range []string{`{}`, `{"logit": "x"}`, `nope`} {
		if m.Load([]byte(bad)) == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	if m.PWork() != 0.5 || m.Answer("hello") != "I only do arithmetic." {
		t.Errorf("p %v", m.PWork())
	}
}
