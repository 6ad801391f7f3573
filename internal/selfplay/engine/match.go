package engine

import (
	"context"
	"fmt"
)

// MatchResult counts a match from the first player's side.
type MatchResult struct {
	Games, Wins, Losses, Draws int
	Unfinished                 int // stopped at the length cap
	Illegal                    int // refused moves, both sides
}

// Score is (wins + draws/2) / games.
func (r MatchResult) Score() float64 {
	if r.Games == 0 {
		return 0
	}
	return (float64(r.Wins) + float64(r.Draws)/2) / float64(r.Games)
}

// Match plays n games of a against b on game idx: game i has seed seed+i
// and puts a in seat i mod players (b in every other seat), so each seat
// is a's equally often. A game counts as a win for a when a's seat gets a
// positive return, a loss when it gets a negative one.
func Match(ctx context.Context, games Games, idx int, a, b Player, n int, seed uint64) (MatchResult, error) {
	np := games.Metadata().NumPlayers
	var r MatchResult
	for i := 0; i < n; i++ {
		seat := i % np
		s := make([]Player, np)
		for p := range s {
			s[p] = b
		}
		s[seat] = a
		rec, err := PlayGame(ctx, games, idx, seed+uint64(i), s, 0)
		if err != nil {
			return r, fmt.Errorf("match %s vs %s, game %d: %w", a.Name(), b.Name(), i, err)
		}
		r.Games++
		r.Illegal += rec.Illegal
		switch o := rec.Outcome[seat]; {
		case !rec.Terminal:
			r.Unfinished++
		case o > 0:
			r.Wins++
		case o < 0:
			r.Losses++
		default:
			r.Draws++
		}
	}
	return r, nil
}
