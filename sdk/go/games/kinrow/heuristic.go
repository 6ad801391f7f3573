package kinrow

import (
	"math"
	"math/rand/v2"
)

// Heuristic scores for the fast bootstrap player, in order: a move that
// wins; one that stops an opponent's five (more for the opponent who moves
// next); one that makes an open four (two ways to win: unstoppable); one
// that stops an opponent's open four; one that makes a four; then the rows
// it extends and the opponents' rows it cuts, open runs weighted 4^length.
const (
	winScore       = 1e9
	blockScore     = 1e6
	openFourScore  = 5e4
	blockOpenScore = 1e4
	fourScore      = 2e3
)

// Scores writes a score for every empty cell (-Inf for taken ones) from
// player p's point of view.
func (g *Game) Scores(p int, scores []float64) {
	n, k := g.cfg.Players, g.geo.K
	next := (p + 1) % n
	for c, o := range g.cells {
		if o >= 0 {
			scores[c] = math.Inf(-1)
			continue
		}
		s := 0.0
		for a := range g.geo.Axes {
			l, open := g.Run(c, a, p)
			switch {
			case l >= k:
				s += winScore
			case l == k-1 && open == 2:
				s += openFourScore
			case l == k-1 && open == 1:
				s += fourScore
			case open > 0:
				s += math.Pow(4, float64(l)) * float64(open)
			}
			for q := 0; q < n; q++ {
				if q == p {
					continue
				}
				w := 1.0
				if q == next {
					w = 2
				}
				l, open := g.Run(c, a, q)
				switch {
				case l >= k:
					s += w * blockScore
				case l == k-1 && open == 2:
					s += w * blockOpenScore
				case open > 0 || l > 1:
					s += 0.8 * math.Pow(4, float64(l-1)) * float64(open+1) / float64(n-1)
				}
			}
		}
		scores[c] = s
	}
}

// HeuristicMove picks player p's move: the best score, ties and near-ties
// (within 10%) broken at random so bootstrap games differ. It returns -1
// when p has no move.
func (g *Game) HeuristicMove(p int, rng *rand.Rand, scores []float64) int {
	if p != g.ToMove() {
		return -1
	}
	if len(scores) < len(g.cells) {
		scores = make([]float64, len(g.cells))
	}
	scores = scores[:len(g.cells)]
	g.Scores(p, scores)
	best := math.Inf(-1)
	for _, s := range scores {
		best = max(best, s)
	}
	pick, seen := -1, 0
	for c, s := range scores {
		if s >= 0.9*best && !math.IsInf(s, -1) {
			seen++
			if rng.IntN(seen) == 0 { // reservoir sampling: uniform over candidates
				pick = c
			}
		}
	}
	return pick
}
