// Package engine plays self-play and evaluation games on game plugins:
// players (Random, Heuristic, Policy, MCTS) choose moves, PlayGame runs
// one game and records what training needs (selfplay.Game: per move the
// mover's observation and the policy target, at the end the outcome per
// player). Players see games through the Games interface, which
// *pluginhost.Games implements; Native is the same interface over the
// k-in-a-row rules in Go, for searches that would otherwise spend their
// time crossing into WASM.
package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/selfplay"
)

// Games is a batch of game instances addressed by index, as
// *pluginhost.Games provides them.
type Games interface {
	Metadata() pluginhost.Metadata
	Reset(game int, seed uint64) error
	ToMove(game int, dst []int) ([]int, error)
	Legal(game, player int, mask []bool) error
	Apply(game, player, action int) error
	Outcome(game int, returns []float32) (bool, error)
	Save(game int, dst []byte) ([]byte, error)
	Restore(game int, state []byte) error
	Observe(game, player int, obs []float32) error
}

var _ Games = (*pluginhost.Games)(nil)

// Position is what a player is asked to move in: game Game of Games, with
// Player to move and Legal its legal-action mask. Ply counts the moves
// played so far.
type Position struct {
	Games  Games
	Game   int
	Player int
	Legal  []bool
	Ply    int
}

// Player chooses moves. Move returns the action for pos.Player and writes
// the policy target into pi (one value per action, summing to 1): the
// visit distribution for search players, one-hot for the others. A player
// may search on pos.Games but must leave the game as it found it. Players
// in this package keep no state between calls and are safe for concurrent
// use on different games when their Evaluator is.
type Player interface {
	Name() string
	Move(ctx context.Context, pos Position, rng *rand.Rand, pi []float32) (int, error)
}

// Modeled is a player guided by a model; PlayGame records ModelName.
type Modeled interface {
	ModelName() string
}

// Evaluator estimates a position for search: priors over the actions (0 on
// illegal ones, summing to 1) and the expected outcome per player, where
// values[i] is for the player i seats after the mover (values[0] is the
// mover's own). obs is the mover's observation.
type Evaluator interface {
	Evaluate(obs []float32, legal []bool, priors, values []float32) error
}

// ConfigOf is the config a game plugin plays: plugins named
// "<game>-<config>" (kinrow-square8_2p) play <config>; others their name.
func ConfigOf(meta pluginhost.Metadata) string {
	if _, cfg, ok := strings.Cut(meta.Name, "-"); ok {
		return cfg
	}
	return meta.Name
}

// PlayGame resets game idx of games with seed and plays it to the end, or
// to maxMoves moves (≤ 0: no cap; a capped game has Terminal false), with
// seats[p] choosing player p's moves. The record's Engine is the seats'
// name when all share it, else their names joined by "/". A move the
// plugin refuses is counted in Illegal and replaced by a random legal one,
// so the game still ends.
func PlayGame(ctx context.Context, games Games, idx int, seed uint64, seats []Player, maxMoves int) (selfplay.Game, error) {
	meta := games.Metadata()
	np, na := meta.NumPlayers, meta.Action.N
	rec := selfplay.Game{Config: ConfigOf(meta), Seed: seed, Players: np}
	if len(seats) != np {
		return rec, fmt.Errorf("play %s: %d seats for %d players", rec.Config, len(seats), np)
	}
	names := make([]string, 0, np)
	for _, s := range seats {
		if !containsStr(names, s.Name()) {
			names = append(names, s.Name())
		}
		if m, ok := s.(Modeled); ok && rec.Model == "" {
			rec.Model = m.ModelName()
		}
	}
	rec.Engine = strings.Join(names, "/")
	if err := games.Reset(idx, seed); err != nil {
		return rec, fmt.Errorf("play %s: reset: %w", rec.Config, err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5e1f))
	legal := make([]bool, na)
	var toMove []int
	var err error
	for ply := 0; maxMoves <= 0 || ply < maxMoves; ply++ {
		if err := ctx.Err(); err != nil {
			return rec, fmt.Errorf("play %s: %w", rec.Config, err)
		}
		if toMove, err = games.ToMove(idx, toMove[:0]); err != nil {
			return rec, fmt.Errorf("play %s: move %d: %w", rec.Config, ply, err)
		}
		if len(toMove) == 0 {
			break
		}
		p := toMove[0] // k-in-a-row and every turn-based game: one mover
		mv := selfplay.Move{Player: p, State: make([]float32, meta.Observation.Dim()), Policy: make([]float32, na)}
		if err := games.Observe(idx, p, mv.State); err != nil {
			return rec, fmt.Errorf("play %s: move %d: %w", rec.Config, ply, err)
		}
		if err := games.Legal(idx, p, legal); err != nil {
			return rec, fmt.Errorf("play %s: move %d: %w", rec.Config, ply, err)
		}
		a, err := seats[p].Move(ctx, Position{Games: games, Game: idx, Player: p, Legal: legal, Ply: ply}, rng, mv.Policy)
		if err != nil {
			return rec, fmt.Errorf("play %s: move %d: %s: %w", rec.Config, ply, seats[p].Name(), err)
		}
		err = games.Apply(idx, p, a)
		if errors.Is(err, pluginhost.ErrBadInput) {
			rec.Illegal++
			a = randomLegal(legal, rng)
			if a < 0 {
				return rec, fmt.Errorf("play %s: move %d: player %d has no legal move", rec.Config, ply, p)
			}
			err = games.Apply(idx, p, a)
		}
		if err != nil {
			return rec, fmt.Errorf("play %s: move %d: apply %d: %w", rec.Config, ply, a, err)
		}
		mv.Action = a
		rec.Moves = append(rec.Moves, mv)
	}
	rec.Outcome = make([]float32, np)
	if rec.Terminal, err = games.Outcome(idx, rec.Outcome); err != nil {
		return rec, fmt.Errorf("play %s: outcome: %w", rec.Config, err)
	}
	return rec, nil
}

func containsStr(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// randomLegal picks a uniformly random legal action, -1 when none is.
func randomLegal(legal []bool, rng *rand.Rand) int {
	pick, seen := -1, 0
	for a, ok := range legal {
		if ok {
			seen++
			if rng.IntN(seen) == 0 {
				pick = a
			}
		}
	}
	return pick
}

func oneHot(pi []float32, a int) {
	clear(pi)
	pi[a] = 1
}
