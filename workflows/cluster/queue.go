package cluster

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/workspec"
)

// queueStale is how long queued work that stopped asking stays listed
// (requesters ask again every 2-30 s while they wait).
const queueStale = 2 * time.Minute

// enqueue notes why a work waits, keeping when it began waiting.
func (c *controller) enqueue(now time.Time, s workspec.Spec, id, reason string, policy bool) {
	if c.st.Queue == nil {
		c.st.Queue = map[string]*waiting{}
	}
	w := c.st.Queue[id]
	if w == nil {
		w = &waiting{Since: now}
		c.st.Queue[id] = w
	}
	w.Work, w.Seen, w.Reason, w.Policy = s, now, reason, policy
}

// ordered is the live queue in scheduling order as of now (read-only:
// queries call it too); work that stopped asking is left out.
func (c *controller) ordered(now time.Time, pp params.Params) []scheduler.Queued {
	q := scheduler.NewQueue(pp)
	for id, w := range c.st.Queue {
		if now.Sub(w.Seen) <= queueStale {
			_ = q.Push(scheduler.Item{Work: scheduler.Work{ID: id, Spec: w.Work}, Priority: w.Work.Priority, Submitted: w.Since})
		}
	}
	return q.Ordered(now)
}

// pruneQueue drops queued work that stopped asking (cancelled, or placed
// by a request that never came back).
func (c *controller) pruneQueue(now time.Time) {
	for id, w := range c.st.Queue {
		if now.Sub(w.Seen) > queueStale {
			delete(c.st.Queue, id)
		}
	}
}

// queue is the status view of the queue.
func (c *controller) queue(now time.Time) []QueueItem {
	var out []QueueItem
	for _, it := range c.ordered(now, c.params) {
		w := c.st.Queue[it.ID]
		out = append(out, QueueItem{
			WorkID: it.ID, Kind: w.Work.Kind, Config: w.Work.Config, Priority: it.Priority, EffectivePriority: it.EffectivePriority,
			Since: w.Since, WaitingSeconds: int64(it.Waited.Seconds()), Reason: w.Reason, Policy: w.Policy, Work: QueuedWork(w.Work),
		})
	}
	return out
}

// placeQueued places w after the queued work that goes before it: each of
// those that fits now (on every node: w's exclusions are its own) takes its
// share first, and w is placed only where it still fits. Work held by a
// policy rule takes nothing. Lower work may backfill around higher work
// that does not fit.
func (c *controller) placeQueued(now time.Time, pp params.Params, exclude []string, w scheduler.Work) scheduler.Placement {
	since := now
	if prev := c.st.Queue[w.ID]; prev != nil {
		since = prev.Since
	}
	mine := pp.EffectivePriority(w.Spec.Priority, now.Sub(since))
	ahead := scheduler.NewQueue(pp)
	for _, it := range c.ordered(now, pp) {
		if it.ID == w.ID || c.st.Queue[it.ID].Policy {
			continue
		}
		if it.EffectivePriority > mine || (it.EffectivePriority == mine && it.Submitted.Before(since)) {
			_ = ahead.Push(it.Item)
		}
	}
	nodes := c.schedulerNodes(exclude)
	if ahead.Len() == 0 {
		return scheduler.New(pp).Place(nodes, w)
	}
	r := scheduler.New(pp).Schedule(now, c.schedulerNodes(nil), ahead)
	var first []string
	for _, pl := range r.Placed {
		first = append(first, pl.WorkID)
		for _, a := range pl.Assignments {
			for i := range nodes {
				if nodes[i].Name == a.Node {
					nodes[i].Allocations = append(nodes[i].Allocations, a.Allocation)
				}
			}
		}
	}
	p := scheduler.New(pp).Place(nodes, w)
	if p.Status == scheduler.Waiting && len(first) > 0 {
		p.Reason += fmt.Sprintf("; queued work ahead of it takes the room first: %v", first)
	}
	return p
}

// schedulerNodes is the scheduler's view: live nodes are ready, excluded
// ones (they lost this job before) and dead ones are down.
func (c *controller) schedulerNodes(exclude []string) []scheduler.Node {
	nodes := make([]scheduler.Node, 0, len(c.st.Order))
	for _, name := range c.st.Order {
		n := c.st.Nodes[name]
		sn := scheduler.Node{Name: name, Provider: n.Spec.Provider, Labels: n.Spec.Labels, Ephemeral: n.Spec.Ephemeral, Capacity: n.Reported}
		sn.InferenceGPUs = inferenceGPUs(c.st.Endpoints, name, n.Reported.GPUs)
		switch {
		case n.Health != Healthy && n.Health != Idle, slices.Contains(exclude, name):
			sn.Health = scheduler.Down
		case n.Draining:
			sn.Health = scheduler.Draining
		}
		jobs := make([]string, 0, len(n.Allocated))
		for j := range n.Allocated {
			jobs = append(jobs, j)
		}
		sort.Strings(jobs) // deterministic order in workflow code
		for _, j := range jobs {
			sn.Allocations = append(sn.Allocations, n.Allocated[j].allocation(j))
		}
		nodes = append(nodes, sn)
	}
	return nodes
}
