package job

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/workflows/cluster"
)

// Placement is one "allocate until placed" loop: jobs, runs' trainers and
// rollout workers, self-play generations and sweep trials all wait for
// their node through it.
type Placement struct {
	Cluster string
	// Request is asked for as is, with Exclude's nodes excluded.
	Request cluster.AllocateRequest
	// Exclude, when set, names the nodes to ask around before each
	// attempt (nodes that lost the work, nodes its siblings use).
	Exclude func() []string
	// Fallback, when set, is asked after an attempt that excluded nodes
	// failed: true asks again at once without them (a node to avoid beats
	// waiting when nothing else fits). It may change what Exclude returns.
	Fallback func(err error) bool
	// Grace is how long work no node could ever take waits for the cluster
	// to change before Place gives up (0: it waits on).
	Grace time.Duration
	// Backoff doubles the wait between attempts up to 30 s (work that may
	// wait hours, where every poll is history); else 2 s.
	Backoff bool
	// What names the work in the error when it gives up ("this job").
	What string
	// Waiting is told why the work waits after each refusal; infeasible
	// when no node could ever take it, with when Place gives up.
	Waiting func(reason string, infeasible bool)
}

// giveBack releases what a cancelled placement may hold: the allocate
// update can commit after its activity was cancelled, and the cluster's
// queue still lists the work. Versioned: histories from before did not.
func giveBack(ctx workflow.Context, pl Placement) {
	if workflow.GetVersion(ctx, "place-gives-back-on-cancel", workflow.DefaultVersion, 1) != 1 {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.SignalExternalWorkflow(dctx, cluster.WorkflowID(pl.Cluster), "", cluster.SignalRelease, cluster.Release{JobID: pl.Request.JobID, Also: pl.Request.Jobs()[1:]}).Get(dctx, nil)
}

// Report is a Placement.Waiting that records the wait in a progress's
// fields: state "waiting" or "infeasible", the reason, and when the wait
// began (since may be nil).
func Report(ctx workflow.Context, state, reason *string, since **time.Time) func(string, bool) {
	return func(why string, infeasible bool) {
		*state, *reason = "waiting", why
		if infeasible {
			*state = "infeasible"
		}
		if since != nil && *since == nil {
			now := workflow.Now(ctx)
			*since = &now
		}
	}
}

// Place asks the cluster for an allocation until it gets one. The reason it
// waits is always reported, never silent; it returns the context's error
// when cancelled, and a non-retryable ErrInfeasible error after Grace.
func Place(ctx workflow.Context, pl Placement) (cluster.Allocation, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	ask := func(exclude []string) (cluster.Allocation, error) {
		req := pl.Request
		req.Exclude = exclude
		var a cluster.Allocation
		err := workflow.ExecuteActivity(actx, (*Activities).Allocate, AllocateInput{Cluster: pl.Cluster, Request: req}).Get(ctx, &a)
		return a, err
	}
	wait := 2 * time.Second
	var infeasibleSince time.Time
	for {
		var exclude []string
		if pl.Exclude != nil {
			exclude = pl.Exclude()
		}
		a, err := ask(exclude)
		if err != nil && len(exclude) > 0 && ctx.Err() == nil && pl.Fallback != nil && pl.Fallback(err) {
			a, err = ask(nil)
		}
		if err == nil {
			return a, nil
		}
		if ctx.Err() != nil {
			giveBack(ctx, pl)
			return a, ctx.Err()
		}
		why := Reason(err)
		var app *temporal.ApplicationError
		infeasible := errors.As(err, &app) && app.Type() == cluster.ErrInfeasible
		if !infeasible {
			infeasibleSince = time.Time{}
		} else if pl.Grace > 0 {
			if infeasibleSince.IsZero() {
				infeasibleSince = workflow.Now(ctx)
			}
			why += fmt.Sprintf("; fails at %s unless a node that fits joins", infeasibleSince.Add(pl.Grace).UTC().Format(time.RFC3339))
			if workflow.Now(ctx).Sub(infeasibleSince) >= pl.Grace {
				if pl.Waiting != nil {
					pl.Waiting(why, true)
				}
				return a, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("no node of cluster %s can ever run %s (waited %v): %s", pl.Cluster, pl.What, pl.Grace, app.Message()), cluster.ErrInfeasible, nil)
			}
		}
		if pl.Waiting != nil {
			pl.Waiting(why, infeasible)
		}
		if err := workflow.Sleep(ctx, wait); err != nil {
			giveBack(ctx, pl)
			return a, err
		}
		if pl.Backoff {
			wait = min(2*wait, 30*time.Second)
		}
	}
}
