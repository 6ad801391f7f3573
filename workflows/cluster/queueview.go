package cluster

import (
	"slices"
	"time"
)

// QueueEntry is one piece of work waiting for a node.
type QueueEntry struct {
	Position     int        `json:"position" doc:"1: placed first (the cluster's queue order: priority plus the starvation boost, then age)."`
	ID           string     `json:"id" doc:"Run or job id (GET /v1/runs/{id}, GET /v1/jobs/{id})."`
	Kind         string     `json:"kind" enum:"run,job"`
	State        string     `json:"state" enum:"waiting,infeasible" doc:"waiting: it fits an empty node but the nodes are busy; infeasible: no node of the cluster could hold it now even empty (a node that fitted left), and it fails when the grace period ends."`
	Reason       string     `json:"reason" example:"no node can take the job now: job#0 fits no node: gpu: needs 1 free GPU; 0 of 1 free (gpu-box)"`
	WaitingSince *time.Time `json:"waiting_since,omitempty"`
	Running      []string   `json:"running,omitempty" doc:"What holds the cluster's nodes now, i.e. what this work waits behind."`
	// EffectivePriority is the priority the queue orders by.
	EffectivePriority int `json:"effective_priority" doc:"Priority plus the starvation boost once it has waited past the policy's threshold (docs/scheduling.md)."`
}

// Order puts work waiting for a node in the order the cluster places it:
// the work in its own queue first, in its order (priority plus the
// starvation boost, then age), each with its effective priority; work it
// has not seen ask yet follows, longest waiting first. Each entry gets its
// position and what it waits behind (whatever holds the nodes now).
func (st Status) Order(waiting []QueueEntry) []QueueEntry {
	var holding []string
	for _, n := range st.Nodes {
		holding = append(holding, n.Jobs...)
	}
	waiting = append([]QueueEntry{}, waiting...)
	for i := range waiting {
		waiting[i].Running = holding
	}
	order := map[string]int{}
	for i, q := range st.Queue {
		order[q.WorkID] = i + 1
		for j := range waiting {
			if waiting[j].ID == q.WorkID {
				waiting[j].EffectivePriority = q.EffectivePriority
			}
		}
	}
	slices.SortStableFunc(waiting, func(a, b QueueEntry) int {
		oa, ob := order[a.ID], order[b.ID]
		switch {
		case oa > 0 && ob > 0:
			return oa - ob
		case oa > 0 || ob > 0:
			return ob - oa // the one the cluster has seen first
		case a.WaitingSince == nil || b.WaitingSince == nil:
			return 0
		}
		return a.WaitingSince.Compare(*b.WaitingSince)
	})
	for i := range waiting {
		waiting[i].Position = i + 1
	}
	return waiting
}
