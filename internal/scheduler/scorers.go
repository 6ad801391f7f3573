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
type scorer interface {
	name() string
	score(c *placeCtx, n *nodeState, u *unit) float64
}

type weighted struct {
	scorer
	weight float64
}

// packingScorer bin-packs by default and for PACK groups (fuller nodes and
// nodes the group already uses win) and spreads for SPREAD groups.
type packingScorer struct{}

func (packingScorer) name() string { return "packing" }
func (packingScorer) score(c *placeCtx, n *nodeState, u *unit) float64 {
	util := min(n.utilisation(u.cpus, u.mem, u.gpus), 1)
	here := 0.0
	if u.group != "" && c.groupNodes[u.group][n.node.Name] > 0 {
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
// the kind's default (training on Tier 1 then 2, evaluation on Tier 2, so
// it does not interrupt training).
type tierScorer struct{}

func (tierScorer) name() string { return "tier" }
func (tierScorer) score(c *placeCtx, n *nodeState, u *unit) float64 {
	if u.gpus == 0 {
		return 0
	}
	pref := c.work.Spec.Tiers
	if len(pref) == 0 {
		switch c.work.Spec.Kind {
		case workspec.KindTraining:
			pref = []int{1, 2}
		case workspec.KindEvaluation:
			pref = []int{2}
		}
	}
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
func (providerScorer) score(c *placeCtx, n *nodeState, _ *unit) float64 {
	prov := n.node.Provider
	pref := c.params.Preference(c.work.Spec.Kind)
	rank := 0.0
	switch {
	case slices.Contains(c.work.Spec.Providers.Prefer, prov), slices.Contains(pref.Prefer, prov):
		rank = 1
	case slices.Contains(pref.Fallback, prov):
		rank = 0.5
	}
	// 1 for free (own hardware), falling towards 0 as the price rises.
	cheap := 1 / (1 + c.params.Cost(prov))
	return 0.7*rank + 0.3*cheap
}
