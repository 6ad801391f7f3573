package api

import (
	"context"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/internal/workspec"
	"github.com/trainyard/trainyard/workflows/cluster"
)

// The one way in for work. Every kind (runs of each algorithm, LLM loops
// among them; jobs; sweeps; self-play loops, schedulers and daemons) is a
// submission once its body is valid and its plugins resolved, and submit
// takes it the same way: the cluster's status, what the kind checks on it
// (the endpoints a run is granted, a GPU a sweep shares), a preflight of
// each unit of work it will place, then its workflow's start. Handlers only
// validate and describe; the last word on admission is the cluster
// workflow's when it takes the work from its queue (workflows/cluster).
type submission struct {
	cluster string
	// units are what the work will ask the cluster to place (a sweep: one
	// per trial), each preflighted; none for daemons that place through
	// loops of their own.
	units []unit
	// live checks what needs the cluster's status; it runs before the
	// preflights and may record what start needs.
	live  func(st cluster.Status) error
	start func(ctx context.Context) error
}

// unit is one piece of work as preflight sees it. what names it in a 422
// ("run", "trial lr=0.1"), loc the body field it comes from ("body",
// "body.run"); extra adds what the admission input cannot know from the
// work alone (a run's capabilities).
type unit struct {
	id, what, loc string
	work          workspec.Spec
	extra         []func(*policy.Input)
}

func (s *Server) submit(ctx context.Context, sub submission) error {
	st, cached, err := s.clusterSnapshot(ctx, sub.cluster)
	if err != nil {
		return err
	}
	decided, err := s.check(ctx, sub, st)
	if err != nil && cached { // a refusal is confirmed on the live status
		if st, err = s.clusterStatus(ctx, sub.cluster); err != nil {
			return err
		}
		decided, err = s.check(ctx, sub, st)
	}
	// Only the decisions of the check that answers are logged: a refusal
	// on the snapshot, then confirmed live, is one decision, not two.
	for _, d := range decided {
		s.d.Admission.Record(ctx, d.id, d.in, d.d)
	}
	if err != nil {
		return err
	}
	return sub.start(ctx)
}

// decided is one admission decision preflight made, to be logged.
type decided struct {
	id string
	in policy.Input
	d  policy.Decision
}

// check runs a submission's live checks and preflights on st and returns
// the admission decisions it made.
func (s *Server) check(ctx context.Context, sub submission, st cluster.Status) ([]decided, error) {
	if sub.live != nil {
		if err := sub.live(st); err != nil {
			return nil, err
		}
	}
	var all []decided
	for _, u := range sub.units {
		d, err := s.preflight(ctx, st, u)
		if d != nil {
			all = append(all, *d)
		}
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

// preflight checks a unit on the cluster's status: admission on its live
// nodes and usage, then whether any node could ever hold the work (the
// placement code the cluster workflow runs). A denial is a 403 listing
// every violated rule, except that work denied only by a usage rule
// (quota, one training per config) is accepted and waits in the cluster's
// queue with the rule as its reason. It returns the admission decision
// made, if any.
func (s *Server) preflight(ctx context.Context, st cluster.Status, u unit) (*decided, error) {
	p := s.d.Admission.Engine().Params()
	in := st.AdmissionInput(p, u.id, u.work)
	for _, f := range u.extra {
		f(&in)
	}
	d, err := s.d.Admission.Evaluate(ctx, u.id, in)
	if err != nil {
		return nil, huma.Error503ServiceUnavailable("admission", err)
	}
	made := &decided{u.id, in, d}
	if !d.Allow && !d.WaitsOnUsage() {
		var details []error
		for _, v := range d.Violations {
			details = append(details, &huma.ErrorDetail{Location: "policy." + v.Rule, Message: v.Reason})
		}
		return made, huma.Error403Forbidden("denied by policy revision "+d.Revision+": "+d.Summary(), details...)
	}
	// Never pending silently: work no node could take even when idle is
	// refused now, with the constraint that makes it impossible.
	if reason := st.Infeasible(p, u.id, u.work); reason != "" {
		return made, huma.Error422UnprocessableEntity(u.what+" can never be placed on cluster "+st.Cluster,
			&huma.ErrorDetail{Location: u.loc, Message: reason})
	}
	return made, nil
}

// clusterSnapshot is the cluster's status as of at most snapshotAge ago;
// cached says it was not queried for this call.
func (s *Server) clusterSnapshot(ctx context.Context, name string) (cluster.Status, bool, error) {
	return s.status.snapshot(ctx, name, s.queryClusterStatus)
}

// clusterStatusWithin is clusterStatus, or a busy cluster's last status
// if it is at most maxAge old (statusCalls.within).
func (s *Server) clusterStatusWithin(ctx context.Context, name string, maxAge time.Duration) (cluster.Status, error) {
	return s.status.within(ctx, name, maxAge, s.queryClusterStatus)
}

// clusterStatus returns the cluster's status; concurrent callers share
// one query (statusCalls.get).
func (s *Server) clusterStatus(ctx context.Context, name string) (cluster.Status, error) {
	return s.status.get(ctx, name, s.queryClusterStatus)
}
