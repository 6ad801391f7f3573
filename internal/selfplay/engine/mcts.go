package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/trainyard/trainyard/sdk/go/games/kinrow"
)

// MCTS is PUCT tree search (AlphaZero's selection rule) guided by an
// Evaluator's priors and values, or, before a model exists, by uniform
// priors and one random rollout per new leaf. Values are kept per player
// (max^n backup), so it plays 3- and 4-player games too. For self-play
// set DirichletAlpha and TempMoves; for evaluation leave them zero.
type MCTS struct {
	Simulations int       // per move; default 64
	CPUCT       float64   // exploration constant; default 1.5
	Eval        Evaluator // nil: uniform priors, random-rollout values
	Model       string    // recorded as the game's model

	DirichletAlpha float64 // > 0: mix Dir(α) noise into the root priors
	NoiseWeight    float64 // weight of that noise; default 0.25
	TempMoves      int     // the first TempMoves plies sample ∝ visits; later ones take the most visited

	// Gumbel searches the root by Gumbel MuZero's sequential halving
	// (gumbel.go) instead of PUCT: few simulations go a long way, and the
	// policy it records is the improved policy, not visit counts.
	Gumbel bool

	// Native searches on a Go copy of the game (Native) when the plugin's
	// saved state is a k-in-a-row state; the tree is the same, the calls
	// do not cross into WASM.
	Native bool
}

func (m *MCTS) Name() string      { return "mcts" }
func (m *MCTS) ModelName() string { return m.Model }

type node struct {
	player   int       // to move; -1 when terminal
	value    []float32 // terminal: per-player returns
	actions  []int
	prior    []float32
	visits   []int32
	wsum     []float32 // Σ value for player over each child's simulations
	children []*node
	n        int32
}

// search is one Move's scratch.
type search struct {
	m      *MCTS
	games  Games
	idx    int
	np, na int
	root   []byte
	rng    *rand.Rand
	legal  []bool
	obs    []float32
	priors []float32
	rel    []float32
	ret    []float32
	toMove []int
}

func (m *MCTS) Move(ctx context.Context, pos Position, rng *rand.Rand, pi []float32) (int, error) {
	legalN, only := 0, -1
	for a, ok := range pos.Legal {
		if ok {
			legalN, only = legalN+1, a
		}
	}
	switch legalN {
	case 0:
		return -1, errors.New("mcts: no legal move")
	case 1:
		oneHot(pi, only)
		return only, nil
	}
	meta := pos.Games.Metadata()
	s := &search{m: m, games: pos.Games, idx: pos.Game, np: meta.NumPlayers, na: meta.Action.N, rng: rng}
	var err error
	if s.root, err = pos.Games.Save(pos.Game, nil); err != nil {
		return -1, fmt.Errorf("mcts: %w", err)
	}
	if m.Native {
		if g, err := kinrow.FromState(s.root); err == nil {
			nt, err := NewNative(g.Config(), 1)
			if err != nil {
				return -1, fmt.Errorf("mcts: %w", err)
			}
			s.games, s.idx = nt, 0
		}
	}
	s.legal = make([]bool, s.na)
	s.obs = make([]float32, meta.Observation.Dim())
	s.priors = make([]float32, s.na)
	s.rel = make([]float32, s.np)
	s.ret = make([]float32, s.np)

	if err := s.games.Restore(s.idx, s.root); err != nil {
		return -1, fmt.Errorf("mcts: %w", err)
	}
	root, rootV, err := s.expand()
	if err != nil {
		return -1, err
	}
	if root.player != pos.Player {
		return -1, fmt.Errorf("mcts: player %d asked to move, the game says %d", pos.Player, root.player)
	}
	sims := m.Simulations
	if sims <= 0 {
		sims = 64
	}
	if m.Gumbel {
		return s.gumbelMove(ctx, root, rootV[root.player], sims, pos, pi)
	}
	if m.DirichletAlpha > 0 {
		s.addNoise(root)
	}
	for i := 0; i < sims; i++ {
		if i%16 == 0 {
			if err := ctx.Err(); err != nil {
				return -1, fmt.Errorf("mcts: %w", err)
			}
		}
		if err := s.simulate(root, -1); err != nil {
			return -1, err
		}
	}
	if err := pos.Games.Restore(pos.Game, s.root); err != nil {
		return -1, fmt.Errorf("mcts: restore the root: %w", err)
	}
	clear(pi)
	best, bestN := -1, int32(-1)
	for i, a := range root.actions {
		pi[a] = float32(root.visits[i]) / float32(root.n)
		if root.visits[i] > bestN || (root.visits[i] == bestN && root.prior[i] > root.prior[best]) {
			best, bestN = i, root.visits[i]
		}
	}
	a := root.actions[best]
	if pos.Ply < m.TempMoves {
		a = sample(pi, pos.Legal, rng)
	}
	return a, nil
}

// simulate runs one selection from the root (through the root's child
// first when first ≥ 0), expands one leaf and backs its value up the path.
func (s *search) simulate(root *node, first int) error {
	if err := s.games.Restore(s.idx, s.root); err != nil {
		return fmt.Errorf("mcts: restore: %w", err)
	}
	type step struct {
		nd *node
		i  int
	}
	var path [64]step
	steps := path[:0]
	nd := root
	var v []float32
	for {
		if nd.player < 0 {
			v = nd.value
			break
		}
		i := first
		if nd != root || first < 0 {
			i = s.selectChild(nd)
		}
		if err := s.games.Apply(s.idx, nd.player, nd.actions[i]); err != nil {
			return fmt.Errorf("mcts: apply %d: %w", nd.actions[i], err)
		}
		steps = append(steps, step{nd, i})
		if c := nd.children[i]; c != nil {
			nd = c
			continue
		}
		c, val, err := s.expand()
		if err != nil {
			return err
		}
		nd.children[i], v = c, val
		break
	}
	for _, st := range steps {
		st.nd.visits[st.i]++
		st.nd.n++
		st.nd.wsum[st.i] += v[st.nd.player]
	}
	return nil
}

// selectChild is PUCT: Q + c·P·√N/(1+n), unvisited children valued 0.
func (s *search) selectChild(nd *node) int {
	c := s.m.CPUCT
	if c <= 0 {
		c = 1.5
	}
	sq := math.Sqrt(float64(nd.n) + 1)
	best, bestU := 0, math.Inf(-1)
	for i := range nd.actions {
		q := 0.0
		if nd.visits[i] > 0 {
			q = float64(nd.wsum[i]) / float64(nd.visits[i])
		}
		u := q + c*float64(nd.prior[i])*sq/(1+float64(nd.visits[i]))
		if u > bestU {
			best, bestU = i, u
		}
	}
	return best
}

// expand creates the node of the game's current state and returns it with
// its value per player (absolute seats).
func (s *search) expand() (*node, []float32, error) {
	var err error
	if s.toMove, err = s.games.ToMove(s.idx, s.toMove[:0]); err != nil {
		return nil, nil, fmt.Errorf("mcts: %w", err)
	}
	if len(s.toMove) == 0 {
		v := make([]float32, s.np)
		if _, err := s.games.Outcome(s.idx, v); err != nil {
			return nil, nil, fmt.Errorf("mcts: %w", err)
		}
		return &node{player: -1, value: v}, v, nil
	}
	p := s.toMove[0]
	if err := s.games.Legal(s.idx, p, s.legal); err != nil {
		return nil, nil, fmt.Errorf("mcts: %w", err)
	}
	nd := &node{player: p}
	for a, ok := range s.legal {
		if ok {
			nd.actions = append(nd.actions, a)
		}
	}
	k := len(nd.actions)
	nd.prior = make([]float32, k)
	nd.visits = make([]int32, k)
	nd.wsum = make([]float32, k)
	nd.children = make([]*node, k)
	v := make([]float32, s.np)
	if s.m.Eval == nil {
		for i := range nd.prior {
			nd.prior[i] = 1 / float32(k)
		}
		if err := s.rollout(v); err != nil {
			return nil, nil, err
		}
		return nd, v, nil
	}
	if err := s.games.Observe(s.idx, p, s.obs); err != nil {
		return nil, nil, fmt.Errorf("mcts: %w", err)
	}
	if err := s.m.Eval.Evaluate(s.obs, s.legal, s.priors, s.rel); err != nil {
		return nil, nil, fmt.Errorf("mcts: evaluate: %w", err)
	}
	sum := float32(0)
	for i, a := range nd.actions {
		nd.prior[i] = s.priors[a]
		sum += s.priors[a]
	}
	for i := range nd.prior {
		if sum > 0 {
			nd.prior[i] /= sum
		} else {
			nd.prior[i] = 1 / float32(k)
		}
	}
	for i, r := range s.rel {
		v[(p+i)%s.np] = r
	}
	return nd, v, nil
}

// rollout plays random legal moves to the end and writes the returns.
func (s *search) rollout(v []float32) error {
	for {
		var err error
		if s.toMove, err = s.games.ToMove(s.idx, s.toMove[:0]); err != nil {
			return fmt.Errorf("mcts: rollout: %w", err)
		}
		if len(s.toMove) == 0 {
			break
		}
		p := s.toMove[0]
		if err := s.games.Legal(s.idx, p, s.legal); err != nil {
			return fmt.Errorf("mcts: rollout: %w", err)
		}
		a := randomLegal(s.legal, s.rng)
		if err := s.games.Apply(s.idx, p, a); err != nil {
			return fmt.Errorf("mcts: rollout: %w", err)
		}
	}
	if _, err := s.games.Outcome(s.idx, v); err != nil {
		return fmt.Errorf("mcts: rollout: %w", err)
	}
	return nil
}

// addNoise mixes Dirichlet noise into the root priors (AlphaZero's
// exploration for self-play).
func (s *search) addNoise(root *node) {
	w := s.m.NoiseWeight
	if w <= 0 {
		w = 0.25
	}
	noise := make([]float64, len(root.prior))
	sum := 0.0
	for i := range noise {
		noise[i] = gamma(s.rng, s.m.DirichletAlpha)
		sum += noise[i]
	}
	if sum <= 0 {
		return
	}
	for i := range root.prior {
		root.prior[i] = float32((1-w)*float64(root.prior[i]) + w*noise[i]/sum)
	}
}

// gamma draws from Gamma(alpha, 1) (Marsaglia and Tsang; alpha < 1 by
// boosting with U^(1/alpha)).
func gamma(rng *rand.Rand, alpha float64) float64 {
	if alpha < 1 {
		return gamma(rng, alpha+1) * math.Pow(rng.Float64(), 1/alpha)
	}
	d := alpha - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
