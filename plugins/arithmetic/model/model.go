// Package model is a stand-in for the LLM behind the arithmetic env's
// LLM-RL loop, small enough to train on a laptop: it has one weight, a
// logit of how often it works a problem out before answering (then it is
// right) instead of answering at once (then it is careless and wrong).
// plugins/arithmetic/trainer/train.py learns that logit from the loop's
// trajectories and writes it to policy.json; an endpoint serving this
// model loads each published policy.json (`trainyard endpoint mock`, the
// loop's tests).
package model

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync/atomic"

	"github.com/trainyard/trainyard/plugins/arithmetic/problem"
)

// Model answers arithmetic prompts. Safe for concurrent use.
type Model struct {
	logit atomic.Uint64 // float64 bits
	n     atomic.Uint64 // answers given: each draws its own style
	seed  uint64
}

// New is a model with logit 0 (works problems out half the time).
func New(seed uint64) *Model { return &Model{seed: seed} }

// PWork is the probability of working a problem out.
func (m *Model) PWork() float64 {
	return 1 / (1 + math.Exp(-math.Float64frombits(m.logit.Load())))
}

// Answer answers the arithmetic env's prompt; a prompt that is no
// arithmetic problem gets a polite refusal.
func (m *Model) Answer(prompt string) string {
	p, ok := problem.Parse(prompt)
	if !ok {
		return "I only do arithmetic."
	}
	r := rand.New(rand.NewPCG(m.seed, m.n.Add(1)))
	if r.Float64() < m.PWork() {
		return "Let me work it out: " + p.Question() + "\n" + strconv.Itoa(p.Answer())
	}
	return strconv.Itoa(p.Answer() + 1)
}

// Load takes new weights: the trainer's policy.json ({"logit": x, ...}).
func (m *Model) Load(policy []byte) error {
	var w struct {
		Logit *float64 `json:"logit"`
	}
	if err := json.Unmarshal(policy, &w); err != nil || w.Logit == nil || math.IsNaN(*w.Logit) || math.IsInf(*w.Logit, 0) {
		return fmt.Errorf("arithmetic model: weights: want {\"logit\": x} with x finite (%v)", err)
	}
	m.logit.Store(math.Float64bits(*w.Logit))
	return nil
}
