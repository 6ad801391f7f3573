package model

import "github.com/trainyard/trainyard/internal/selfplay"

// Examples are training positions, one per recorded move, shared with the
// NPZ export (states, policy, value, to_move arrays).
type Examples struct {
	States   [][]float32 // the mover's observation
	Policies [][]float32 // the search's visit distribution
	Values   []float32   // the game's outcome for the mover
	ToMove   []int       // the mover's seat
	// Outcomes[i][j] is the outcome for the player j seats after the mover
	// (Outcomes[i][0] == Values[i]); it trains the value head of every
	// seat. Nil (e.g. read back from an NPZ export): the other seats'
	// targets are inferred from Values (exact for two players).
	Outcomes [][]float32
}

// Len is the number of positions.
func (e Examples) Len() int { return len(e.Values) }

// ExamplesFrom turns recorded games into positions. Games are taken as
// given: filtering (illegal moves, unfinished games) is the quality gate's.
func ExamplesFrom(games []selfplay.Game) Examples {
	var e Examples
	for _, g := range games {
		n := len(g.Outcome)
		for _, mv := range g.Moves {
			if mv.Player < 0 || mv.Player >= n {
				continue
			}
			rel := make([]float32, n)
			for j := range rel {
				rel[j] = g.Outcome[(mv.Player+j)%n]
			}
			e.States = append(e.States, mv.State)
			e.Policies = append(e.Policies, mv.Policy)
			e.Values = append(e.Values, g.Outcome[mv.Player])
			e.ToMove = append(e.ToMove, mv.Player)
			e.Outcomes = append(e.Outcomes, rel)
		}
	}
	return e
}
