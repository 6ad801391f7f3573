package scheduler

import (
	"slices"

	"github.com/trainyard/trainyard/internal/workspec"
)

// Score is one scorer's opinion of a node, in [0, 1].
type Score struct {
	Stage string  `json:"stage"`
	Value float64 `json:"value"`
}

// scorer is one ranking stage; its weight scales it in the total.
// scoreAll writes score of every node not rejected (rejs) to out.
type scorer interface {
	name() string
	scoreAll(c *placeCtx, nodes []*nodeState, u *unit, rejs []rej, out []float64)
}

type weighted struct {
	scorer
	weight float64
}

// packingScorer bin-packs by default and for PACK groups (fuller nodes and
// nodes the group already uses win) and spreads for SPREAD groups.
type packingScorer struct{}

func (packingScorer) name() string { return "packing" }
func (f packingScorer) scoreAll(c *placeCtx, nodes []*nodeState, u *unit, rejs []rej, out []float64) {
	for i, n := range nodes {
		if rejs[i].kind == accepted {
			out[i] = f.score(c, n, u)
		}
	}
}
func (packingScorer) score(c *placeCtx, n *nodeState, u *unit) float64 {
	util := min(n.utilisation(u.cpus, u.mem, u.gpus), 1)
	here := 0.0
	if u.group != "" && c.groupHere(n) {
		here = 1
	}
	switch u.strat {
	case workspec.Spread, workspec.StrictSpread:
		return 0.5*(1-util) + 0.5*(1-here)
	case workspec.Pack:
		return 0.5*util + 0.5*here
	default:
		return util
	}
}

// tierScorer ranks nodes by GPU tier for GPU units: the spec's tiers, else
// the policy's for the kind (params.tier_preferences; shipped: training on
// Tier 1 then 2, evaluation on Tier 2 so it does not interrupt training,
// self-play on the smallest tier that fits the board).
type tierScorer struct{}

func (tierScorer) name() string { return "tier" }
func (f tierScorer) scoreAll(c *placeCtx, nodes []*nodeState, u *unit, rejs []rej, out []float64) {
	for i, n := range nodes {
		if rejs[i].kind == accepted {
			out[i] = f.score(c, n, u)
		}
	}
}
func (tierScorer) score(c *placeCtx, n *nodeState, u *unit) float64 {
	if u.gpus == 0 {
		return 0
	}
	pref := c.tiers
	i := slices.Index(pref, n.tier)
	if i < 0 {
		return 0
	}
	return 1 - float64(i)/float64(len(pref))
}

// providerScorer: preferred providers first (the spec's, then the kind's
// prefer and fallback lists), cheaper providers next.
type providerScorer struct{}

func (providerScorer) name() string { return "provider" }
func (f providerScorer) scoreAll(c *placeCtx, nodes []*nodeState, u *unit, rejs []rej, out []float64) {
	for i, n := range nodes {
		if rejs[i].kind == accepted {
			out[i] = f.score(c, n, u)
		}
	}
}
func (providerScorer) score(c *placeCtx, n *nodeState, _ *unit) float64 {
	return c.provs[n.prov].score
}

// providerScore ranks a provider for the work (newPlaceCtx asks once per
// provider).
func providerScore(c *placeCtx, prov string, cost float64) float64 {
	rank := 0.0
	switch {
	case slices.Contains(c.work.Spec.Providers.Prefer, prov), slices.Contains(c.pref.Prefer, prov):
		rank = 1
	case slices.Contains(c.pref.Fallback, prov):
		rank = 0.5
	}
	// 1 for free (own hardware), falling towards 0 as the price rises.
	cheap := 1 / (1 + cost)
	return 0.7*rank + 0.3*cheap
}
