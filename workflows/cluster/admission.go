package cluster

import (
	"time"

	"github.com/trainyard/trainyard/internal/ledger"
	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/workspec"
)

// Usage is the ledger summed over p's quota window, at the snapshot's
// time.
func (s Status) Usage(p params.Params) ledger.Summary {
	b := s.book()
	return b.Sum(p, s.now())
}

// book is the snapshot's ledger: its records and folded hours.
func (s Status) book() ledger.Book {
	return ledger.Book{Records: s.Ledger, Folded: s.LedgerFolded}
}

func (s Status) now() time.Time {
	if s.Now.IsZero() {
		return time.Now()
	}
	return s.Now
}

// AdmissionInput is what admission decides a work on against this
// snapshot: the fleet, its inference endpoints, the live usage, and how
// long the work has waited in the queue (the starvation boost).
func (s Status) AdmissionInput(p params.Params, id string, ws workspec.Spec) policy.Input {
	var waited int64
	for _, q := range s.Queue {
		if q.WorkID == id {
			waited = q.WaitingSeconds
		}
	}
	nodes := s.SchedulerNodes()
	in := policy.Input{Work: policy.WorkInput(id, ws, waited), Cluster: policy.ClusterInput(nodes)}
	in.Cluster.Endpoints = policy.EndpointsInput(s.Endpoints)
	b := s.book()
	in.Usage = policy.UsageFromLedger(p, nodes, b.Quota(p, s.now()))
	return in
}

// Infeasible is why no node of the cluster could ever hold the work, or
// empty when some could: the placement code the workflow runs, on this
// snapshot (the fail-fast check at submission).
func (s Status) Infeasible(p params.Params, id string, ws workspec.Spec) string {
	pl := scheduler.New(p).Place(s.SchedulerNodes(), scheduler.Work{ID: id, Spec: ws})
	if pl.Status == scheduler.Infeasible {
		return pl.Reason
	}
	return ""
}
