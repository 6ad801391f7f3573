package cluster

import (
	"maps"
	"slices"
	"sort"
	"time"

	"go.temporal.io/sdk/workflow"
)

// reconciler looks up, now and then, whether the workflows holding
// allocations are still running (Activities.ClosedOwners).
type reconciler struct {
	on, running bool
	last        time.Time
	done        workflow.Channel // the closed owners of a finished lookup
	actx        workflow.Context
}

// ReconcileEvery is how often the cluster looks up its allocations'
// owners: the longest a closed workflow's reservation outlives it.
const ReconcileEvery = 30 * time.Second

func (r *reconciler) maybeStart(ctx workflow.Context, c *controller) {
	now := workflow.Now(ctx)
	if !r.on || r.running || now.Sub(r.last) < ReconcileEvery {
		return
	}
	owners := c.owners()
	if len(owners) == 0 {
		return
	}
	r.running, r.last = true, now
	workflow.Go(ctx, func(gctx workflow.Context) {
		var closed []string
		if err := workflow.ExecuteActivity(r.actx, (*Activities).ClosedOwners, owners).Get(gctx, &closed); err != nil {
			closed = nil // Temporal unreachable: try again next period
		}
		r.done.Send(gctx, closed)
	})
}

// owners are the workflows holding allocations, sorted.
func (c *controller) owners() []string {
	seen := map[string]bool{}
	for _, n := range c.st.Nodes {
		for _, u := range n.Allocated {
			if u.Owner != "" {
				seen[u.Owner] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// releaseOwners gives back everything the closed workflows hold.
func (c *controller) releaseOwners(now time.Time, closed []string) {
	for _, owner := range closed {
		var works []string
		for _, name := range c.st.Order {
			for k, u := range c.st.Nodes[name].Allocated {
				if u.Owner != owner {
					continue
				}
				if u.Work != "" {
					k = u.Work
				}
				if !slices.Contains(works, k) {
					works = append(works, k)
				}
			}
		}
		sort.Strings(works)
		for _, w := range works {
			c.release(now, w)
		}
		if len(works) > 0 {
			c.event(now, "released %v: their workflow %s has closed without giving them back", works, owner)
		}
	}
}
