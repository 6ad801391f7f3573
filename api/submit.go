package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
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

// statusCall is one in-flight query of a cluster's status.
type statusCall struct {
	done chan struct{}
	st   cluster.Status
	err  error
}

// statusCalls are the queries in flight, by cluster, and the latest
// answer of each.
type statusCalls struct {
	mu     sync.Mutex
	calls  map[string]*statusCall
	latest map[string]snapshot
}

// snapshot is a status and when it was answered.
type snapshot struct {
	st cluster.Status
	at time.Time
}

// snapshotAge is how old a status preflight may pass work on. Preflight
// only fails fast: the cluster workflow decides admission and placement
// again on its own state when it takes the work, and a refusal is checked
// again on a fresh status, so a second-old view refuses nothing wrongly,
// and a burst of submissions costs the busy cluster execution one query a
// second instead of one each (a shared snapshot: read it, never change it).
const snapshotAge = time.Second

// clusterSnapshot is the cluster's status as of at most snapshotAge ago;
// cached says it was not queried for this call.
func (s *Server) clusterSnapshot(ctx context.Context, name string) (st cluster.Status, cached bool, err error) {
	sc := &s.status
	sc.mu.Lock()
	last, ok := sc.latest[name]
	sc.mu.Unlock()
	if ok && time.Since(last.at) < snapshotAge {
		return last.st, true, nil
	}
	st, err = s.clusterStatus(ctx, name)
	var busy huma.StatusError // temporalErr's 429: too busy to answer
	if errors.As(err, &busy) && busy.GetStatus() == http.StatusTooManyRequests && ok && time.Since(last.at) < staleSnapshotAge {
		return last.st, true, nil // a busy cluster: the last view, not a 429
	}
	return st, false, err
}

// staleSnapshotAge is how old a status preflight may pass work on when the
// cluster execution is too busy to answer a query.
const staleSnapshotAge = 30 * time.Second

// clusterStatus returns the cluster's status. Concurrent callers share one
// query: every query is a task on the control worker, and a burst of 200
// submissions asking one by one made the last ones time out.
func (s *Server) clusterStatus(ctx context.Context, name string) (cluster.Status, error) {
	sc := &s.status
	sc.mu.Lock()
	c, ok := sc.calls[name]
	if !ok {
		c = &statusCall{done: make(chan struct{})}
		if sc.calls == nil {
			sc.calls = map[string]*statusCall{}
		}
		sc.calls[name] = c
		// Not the first caller's context: its cancellation must not fail the others.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		go func() {
			defer cancel()
			c.st, c.err = s.queryClusterStatus(qctx, name)
			sc.mu.Lock()
			delete(sc.calls, name)
			if c.err == nil {
				if sc.latest == nil {
					sc.latest = map[string]snapshot{}
				}
				sc.latest[name] = snapshot{c.st, time.Now()}
			}
			sc.mu.Unlock()
			close(c.done)
		}()
	}
	sc.mu.Unlock()
	select {
	case <-c.done:
		return c.st, c.err
	case <-ctx.Done():
		return cluster.Status{}, temporalErr("cluster "+name, ctx.Err())
	}
}
