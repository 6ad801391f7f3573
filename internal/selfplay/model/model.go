// Package model is the built-in self-play learner: a small policy+value
// network (one tanh MLP trunk on internal/nn whose linear output holds the
// policy logits over the actions and one value per player), trained with
// Adam on self-play positions to minimise cross-entropy to the search's
// visit distribution plus squared error to the game outcome. A Model is an
// engine.Evaluator, so MCTS and the Policy player use it directly.
package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/trainyard/trainyard/internal/nn"
)

// Shape is what a network is built for.
type Shape struct {
	ObsDim  int   `json:"obs_dim"`
	Actions int   `json:"actions"`
	Players int   `json:"players"`
	Hidden  []int `json:"hidden"` // trunk widths; default [128]
}

// Model is a policy+value network. Evaluate is safe for concurrent use;
// Train is not (and must not run beside Evaluate on the same Model).
type Model struct {
	Name   string // recorded in games (e.g. "square8_2p-g3")
	shape  Shape
	mlp    nn.MLP
	params []float64
	steps  int64 // optimiser steps trained so far
	pool   sync.Pool
}

// New builds a network with orthogonal initial weights drawn from seed:
// the policy head starts near uniform (gain 0.01), the value head near 0.
func New(s Shape, seed uint64) (*Model, error) {
	if s.ObsDim < 1 || s.Actions < 1 || s.Players < 1 {
		return nil, fmt.Errorf("model: shape %+v: dimensions must be positive", s)
	}
	if len(s.Hidden) == 0 {
		s.Hidden = []int{128}
	}
	s.Hidden = append([]int(nil), s.Hidden...)
	mlp, err := nn.NewMLP(append(append([]int{s.ObsDim}, s.Hidden...), s.Actions+s.Players)...)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m := &Model{shape: s, mlp: mlp, params: make([]float64, mlp.NumParams())}
	mlp.Init(m.params, rand.New(rand.NewPCG(seed, 0x30de1)), math.Sqrt2, 0.01)
	return m, nil
}

// Shape is the network's shape.
func (m *Model) Shape() Shape { return m.shape }

// NumParams is the number of weights.
func (m *Model) NumParams() int { return len(m.params) }

// Steps is the number of optimiser steps the model has been trained for.
func (m *Model) Steps() int64 { return m.steps }

func (m *Model) workspace() *nn.Workspace {
	if ws, ok := m.pool.Get().(*nn.Workspace); ok {
		return ws
	}
	return m.mlp.NewWorkspace(1)
}

// Evaluate implements engine.Evaluator: priors are the softmax of the
// policy logits over the legal actions (0 elsewhere); values[i] is the
// tanh value head for the player i seats after the mover.
func (m *Model) Evaluate(obs []float32, legal []bool, priors, values []float32) error {
	s := m.shape
	if len(obs) != s.ObsDim || len(legal) != s.Actions || len(priors) != s.Actions || len(values) != s.Players {
		return fmt.Errorf("model %s: evaluate: obs %d legal %d priors %d values %d, want %d %d %d %d",
			m.Name, len(obs), len(legal), len(priors), len(values), s.ObsDim, s.Actions, s.Actions, s.Players)
	}
	ws := m.workspace()
	defer m.pool.Put(ws)
	x := make([]float64, s.ObsDim)
	for i, v := range obs {
		x[i] = float64(v)
	}
	out := m.mlp.Forward(m.params, ws, x, 1)
	if !softmax(out[:s.Actions], legal, priors) {
		return errors.New("model: evaluate: no legal action")
	}
	for i := range values {
		values[i] = float32(math.Tanh(out[s.Actions+i]))
	}
	return nil
}

// softmax writes the softmax of logits over the legal entries into p (0
// for illegal ones; all entries when legal is nil) and reports whether
// any entry was legal.
func softmax(logits []float64, legal []bool, p []float32) bool {
	mx := math.Inf(-1)
	for a, l := range logits {
		if legal == nil || legal[a] {
			mx = max(mx, l)
		}
	}
	if math.IsInf(mx, -1) {
		return false
	}
	sum := 0.0
	for a, l := range logits {
		if legal == nil || legal[a] {
			sum += math.Exp(l - mx)
		}
	}
	for a, l := range logits {
		p[a] = 0
		if legal == nil || legal[a] {
			p[a] = float32(math.Exp(l-mx) / sum)
		}
	}
	return true
}
