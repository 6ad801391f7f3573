package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
)

// Gumbel MuZero's root search (Danihelka et al., "Policy improvement by
// planning with Gumbel", ICLR 2022), as DeepMind's mctx implements it:
//
//   - Gumbel-Top-k: draw g(a) ~ Gumbel(0,1) per legal action and consider
//     the k actions with the largest g(a) + logit(a) (k = min(16, legal,
//     simulations)).
//   - Sequential halving: split the simulations over ⌈log₂ k⌉ phases; in
//     each, every action still considered gets an equal share, then the
//     better half by g(a) + logit(a) + σ(q̂(a)) stays.
//   - The move is the last action standing; the policy recorded for
//     training is softmax(logit + σ(completed q̂)), where an action never
//     visited is valued at the root's own value estimate.
//
// σ(q̂) = (cVisit + max visits) · cScale · q̂ (completedQ). Below the root,
// selection stays PUCT.
const (
	gumbelConsidered = 16
	gumbelCVisit     = 50
	gumbelCScale     = 0.1
)

func (s *search) gumbelMove(ctx context.Context, root *node, rootValue float32, sims int, pos Position, pi []float32) (int, error) {
	k := len(root.actions)
	logit, g := make([]float64, k), make([]float64, k)
	for i, p := range root.prior {
		logit[i] = math.Log(max(float64(p), 1e-12))
	}
	// Always noise, as mctx does: the move is then a sample of the
	// improved policy, which is what makes it an improvement; without it,
	// equal priors (no model yet) would consider the first 16 cells by
	// index.
	for i := range g {
		g[i] = -math.Log(-math.Log(max(s.rng.Float64(), 1e-300)))
	}
	cand := make([]int, k)
	for i := range cand {
		cand[i] = i
	}
	byScore := func(score func(i int) float64) func(a, b int) int {
		return func(a, b int) int {
			sa, sb := score(a), score(b)
			switch {
			case sa > sb:
				return -1
			case sa < sb:
				return 1
			}
			return a - b
		}
	}
	slices.SortFunc(cand, byScore(func(i int) float64 { return g[i] + logit[i] }))
	cand = cand[:min(gumbelConsidered, k, sims)]

	sigma := make([]float64, k)
	phases := max(1, int(math.Ceil(math.Log2(float64(len(cand))))))
	used := 0
	for len(cand) > 1 && used < sims {
		per := max(1, sims/(phases*len(cand)))
		for _, i := range cand {
			for range per {
				if used >= sims {
					break
				}
				if used%16 == 0 {
					if err := ctx.Err(); err != nil {
						return -1, fmt.Errorf("mcts: %w", err)
					}
				}
				if err := s.simulate(root, i); err != nil {
					return -1, err
				}
				used++
			}
		}
		s.completedQ(root, rootValue, sigma)
		slices.SortFunc(cand, byScore(func(i int) float64 { return g[i] + logit[i] + sigma[i] }))
		cand = cand[:(len(cand)+1)/2]
	}
	if err := pos.Games.Restore(pos.Game, s.root); err != nil {
		return -1, fmt.Errorf("mcts: restore the root: %w", err)
	}
	// The improved policy over every legal action.
	clear(pi)
	hi, z := math.Inf(-1), 0.0
	w := make([]float64, k)
	s.completedQ(root, rootValue, sigma)
	for i := range w {
		w[i] = logit[i] + sigma[i]
		hi = max(hi, w[i])
	}
	for i := range w {
		w[i] = math.Exp(w[i] - hi)
		z += w[i]
	}
	for i, a := range root.actions {
		pi[a] = float32(w[i] / z)
	}
	return root.actions[cand[0]], nil
}

// completedQ writes σ(q̂) for each root action: q̂ is the mean value of its
// simulations for the mover, or for an action never visited the mixed
// value (the root's own estimate, mixed with the visited actions' values
// weighted by their priors), rescaled to [0, 1] over the actions.
func (s *search) completedQ(root *node, rootValue float32, sigma []float64) {
	var pSum, pq float64
	maxN := int32(0)
	for i, n := range root.visits {
		maxN = max(maxN, n)
		if n > 0 {
			pSum += float64(root.prior[i])
			pq += float64(root.prior[i]) * float64(root.wsum[i]) / float64(n)
		}
	}
	mix := float64(rootValue)
	if pSum > 0 {
		mix = (mix + float64(root.n)*pq/pSum) / (1 + float64(root.n))
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, n := range root.visits {
		sigma[i] = mix
		if n > 0 {
			sigma[i] = float64(root.wsum[i]) / float64(n)
		}
		lo, hi = min(lo, sigma[i]), max(hi, sigma[i])
	}
	for i := range sigma {
		sigma[i] = (gumbelCVisit + float64(maxN)) * gumbelCScale * (sigma[i] - lo) / max(hi-lo, 1e-8)
	}
}
