// The learning test is compiled out under -race (30× slower there, and
// single-goroutine); `make test` runs it first without -race (mk/games.mk),
// as it does PPO's.

//go:build !race

package model

import (
	"context"
	"fmt"
	"testing"

	"github.com/trainyard/trainyard/internal/selfplay"
	"github.com/trainyard/trainyard/internal/selfplay/engine"
	"github.com/trainyard/trainyard/sdk/go/games/kinrow"
)

// selfPlay plays n games of p against itself on games, seeds seed+i.
func selfPlay(t *testing.T, games engine.Games, p engine.Player, n int, seed uint64) []selfplay.Game {
	t.Helper()
	seats := make([]engine.Player, games.Metadata().NumPlayers)
	for i := range seats {
		seats[i] = p
	}
	var out []selfplay.Game
	for i := 0; i < n; i++ {
		g, err := engine.PlayGame(context.Background(), games, 0, seed+uint64(i), seats, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return out
}

// TestLearnsToBeatRandom is the learning loop in small: a heuristic
// bootstrap generation, then generations of model-guided MCTS self-play
// (32 simulations, Dirichlet noise, temperature), each training the model
// further on a window of recent games. The trained network alone (Policy
// sampling from its priors, no search) must then beat the random player by
// a clear margin over a fixed set of games, where the untrained network
// does not. Games and steps are fixed, so it takes the same work anywhere.
func TestLearnsToBeatRandom(t *testing.T) {
	ctx := context.Background()
	cfg := kinrow.Config{Board: kinrow.Square8, Players: 2}
	games, err := engine.NewNative(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	meta := games.Metadata()
	m, err := New(Shape{ObsDim: meta.Observation.Dim(), Actions: meta.Action.N, Players: 2, Hidden: []int{64}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	const evalGames = 60
	untrained, err := engine.Match(ctx, games, 0, engine.Policy{Eval: m.Clone(), Sample: true}, engine.Random{}, evalGames, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("untrained policy vs random: %+v", untrained)

	window := selfPlay(t, games, engine.Heuristic{}, 100, 1)
	for gen := 0; gen < 5; gen++ {
		st, err := Train(m, ExamplesFrom(window), HParams{Epochs: 10, LR: 3e-3, Seed: uint64(gen)})
		if err != nil {
			t.Fatal(err)
		}
		m.Name = fmt.Sprintf("square8_2p-g%d", gen)
		res, err := engine.Match(ctx, games, 0, engine.Policy{Eval: m, Sample: true}, engine.Random{}, evalGames, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("generation %d: %d positions, %+v; policy vs random %+v", gen, ExamplesFrom(window).Len(), st, res)
		mcts := &engine.MCTS{Simulations: 32, Eval: m, Model: m.Name, DirichletAlpha: 0.3, TempMoves: 6, Native: true}
		fresh := selfPlay(t, games, mcts, 40, uint64(1000*(gen+1)))
		window = append(window[min(len(window), 20):], fresh...)
	}
	trained, err := engine.Match(ctx, games, 0, engine.Policy{Eval: m, Sample: true}, engine.Random{}, evalGames, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	search, err := engine.Match(ctx, games, 0, &engine.MCTS{Simulations: 32, Eval: m, Native: true}, engine.Random{}, 20, 20_000)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("trained policy vs random: %+v (score %.2f; untrained %.2f); MCTS-32 with the model vs random: %+v",
		trained, trained.Score(), untrained.Score(), search)
	// Sampling from the priors (not the argmax) so the untrained net is a
	// coin flip (a fixed argmax order alone beats random often).
	if trained.Wins < 45 || trained.Score() < untrained.Score()+0.25 {
		t.Fatalf("trained policy won %d of %d against random (untrained %d): want at least 45 and a score 0.25 above the untrained one", trained.Wins, evalGames, untrained.Wins)
	}
	if search.Wins < 19 {
		t.Fatalf("MCTS with the model won %d of 20 against random, want at least 19", search.Wins)
	}
}
