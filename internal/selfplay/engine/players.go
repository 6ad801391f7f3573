package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/trainyard/trainyard/sdk/go/games/kinrow"
)

// Random plays uniformly random legal moves: the baseline every model must
// beat.
type Random struct{}

func (Random) Name() string { return "random" }

func (Random) Move(_ context.Context, pos Position, rng *rand.Rand, pi []float32) (int, error) {
	a := randomLegal(pos.Legal, rng)
	if a < 0 {
		return -1, errors.New("random: no legal move")
	}
	oneHot(pi, a)
	return a, nil
}

// Heuristic is the fast bootstrap player (Tier 3): on k-in-a-row it wins
// at once when it can, blocks an opponent's winning cell, and otherwise
// extends its own open lines and cuts the opponents' (kinrow.Game.Scores),
// near-ties at random. On other games it takes a move that wins at once
// (one-ply lookahead through Save/Apply/Restore) or a random one.
type Heuristic struct{}

func (Heuristic) Name() string { return "heuristic" }

func (Heuristic) Move(_ context.Context, pos Position, rng *rand.Rand, pi []float32) (int, error) {
	state, err := pos.Games.Save(pos.Game, nil)
	if err != nil {
		return -1, fmt.Errorf("heuristic: %w", err)
	}
	a := -1
	if g, err := kinrow.FromState(state); err == nil {
		a = g.HeuristicMove(pos.Player, rng, nil)
	} else if a, err = winNow(pos, state); err != nil {
		return -1, fmt.Errorf("heuristic: %w", err)
	}
	if a < 0 {
		a = randomLegal(pos.Legal, rng)
	}
	if a < 0 {
		return -1, errors.New("heuristic: no legal move")
	}
	oneHot(pi, a)
	return a, nil
}

// winNow tries every legal move and returns one after which pos.Player has
// won, or -1.
func winNow(pos Position, state []byte) (int, error) {
	ret := make([]float32, pos.Games.Metadata().NumPlayers)
	for a, ok := range pos.Legal {
		if !ok {
			continue
		}
		if err := pos.Games.Apply(pos.Game, pos.Player, a); err != nil {
			return -1, err
		}
		over, err := pos.Games.Outcome(pos.Game, ret)
		if err != nil {
			return -1, err
		}
		if err := pos.Games.Restore(pos.Game, state); err != nil {
			return -1, err
		}
		if over && ret[pos.Player] > 0 {
			return a, nil
		}
	}
	return -1, nil
}

// Policy plays from an Evaluator's priors without search: the argmax, or
// a sample when Sample is set. It measures what a network learned on its
// own.
type Policy struct {
	Eval   Evaluator
	Model  string // recorded as the game's model
	Sample bool
}

func (p Policy) Name() string      { return "policy" }
func (p Policy) ModelName() string { return p.Model }

func (p Policy) Move(_ context.Context, pos Position, rng *rand.Rand, pi []float32) (int, error) {
	meta := pos.Games.Metadata()
	obs := make([]float32, meta.Observation.Dim())
	if err := pos.Games.Observe(pos.Game, pos.Player, obs); err != nil {
		return -1, fmt.Errorf("policy: %w", err)
	}
	values := make([]float32, meta.NumPlayers)
	if err := p.Eval.Evaluate(obs, pos.Legal, pi, values); err != nil {
		return -1, fmt.Errorf("policy: %w", err)
	}
	a := -1
	if p.Sample {
		a = sample(pi, pos.Legal, rng)
	} else {
		best := float32(math.Inf(-1))
		for i, ok := range pos.Legal {
			if ok && pi[i] > best {
				a, best = i, pi[i]
			}
		}
	}
	if a < 0 {
		return -1, errors.New("policy: no legal move")
	}
	oneHot(pi, a)
	return a, nil
}

// sample draws an action with probability ∝ w among legal ones (uniform
// when all weights are 0).
func sample(w []float32, legal []bool, rng *rand.Rand) int {
	total := 0.0
	for a, ok := range legal {
		if ok {
			total += float64(w[a])
		}
	}
	if total <= 0 {
		return randomLegal(legal, rng)
	}
	x := rng.Float64() * total
	last := -1
	for a, ok := range legal {
		if !ok {
			continue
		}
		last = a
		if x -= float64(w[a]); x < 0 {
			return a
		}
	}
	return last
}
