package cluster

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/scheduler"
)

// The scheduling cycle (versioned "scheduling-cycle"). Before it, each
// allocate update held a lock across its own decision: a scheduler
// proposal, an AdmitPlacement activity carrying the whole cluster into the
// history, and a commit, one update after another. Now an update queues its
// ask and waits; one coroutine takes every ask waiting, places them in one
// pass in queue order on one snapshot (scheduler.Cycle), asks the bundle
// about the whole batch in one local activity (AdmitBatch: the snapshot
// never enters the history) and commits what the bundle admitted and still
// fits. Asks that arrive meanwhile are the next batch, so a batch grows
// with the load.
type cycle struct {
	on bool
	// asks wait for the next cycle, in arrival order.
	asks []*ask
	// parked are asks of waiting work held open until room may have
	// freed (wake: a release, a heartbeat that changed something, a node
	// added or undrained) or parkFor passed: the work is placed in the
	// cycle after room frees instead of when it next asks (every 2-30 s),
	// and does not ask in the meantime.
	parked []*ask
	wake   bool
	// parks: versioned park-waiting-asks (older histories answered every
	// waiting ask at once).
	parks bool
	// closeFast: versioned closing-answers-asks. A closing run answers the
	// asks still waiting for a cycle with ErrRetry instead of deciding
	// them: under load, a 1,000-node cluster deciding 500 of them in
	// 256-ask cycles of 6-11 s each did not continue as new for minutes
	// while signals passed its history limit.
	closeFast bool
	// busy is true while a batch is decided; closing once the run is to
	// continue as new: new asks are refused (ErrRetry) and the run waits
	// until the asks it took are answered.
	busy, closing bool
	// updates counts this run's allocate updates: Temporal refuses more
	// than 2,000 in one run (history.maxTotalUpdates).
	updates int
	stats   CycleStats
}

// ask is one allocate update waiting for its cycle.
type ask struct {
	req AllocateRequest
	// tries counts the cycles that decided it without an answer (the
	// cluster changed under the bundle, or a placement rule refused the
	// placement proposed), denied says why they refused.
	tries  int
	denied []string
	// until is when a parked ask is answered with why it waits (waits).
	until time.Time
	waits error
	done  bool
	out   Allocation
	err   error
}

func (a *ask) answer(out Allocation, err error) { a.out, a.err, a.done = out, err, true }

// CycleStats is what the cluster's status shows of its scheduling cycle
// since the run began (a run continues as new every few thousand events).
type CycleStats struct {
	Cycles    int `json:"cycles" doc:"Scheduling cycles this run of the cluster workflow decided."`
	Decided   int `json:"decided" doc:"Asks those cycles decided (placed, waiting or refused)."`
	Placed    int `json:"placed" doc:"Placements those cycles committed."`
	LastBatch int `json:"last_batch" doc:"Asks the latest cycle decided."`
	Waiting   int `json:"waiting" doc:"Asks waiting for the next cycle now."`
	Parked    int `json:"parked" doc:"Asks of waiting work held open until room frees (up to 20 s each)."`
}

// maxBatch bounds the asks one cycle decides.
const maxBatch = 256

// maxRunUpdates is how many allocate updates a run takes before it
// continues as new, below Temporal's 2,000 per run.
const maxRunUpdates = 1500

// ErrRetry is the error type of an ask refused because the cluster's run
// is continuing as new: asked again, it reaches the next run.
const ErrRetry = "Retry"

// errContinuing answers an ask the closing run does not decide.
func (c *controller) errContinuing() error {
	return temporal.NewApplicationError("cluster "+c.st.Name+" is continuing as new; ask again", ErrRetry)
}

func (cy *cycle) idle() bool { return !cy.busy && len(cy.asks) == 0 && len(cy.parked) == 0 }

// parkFor is the longest an ask is held open: under the Allocate
// activity's 30 s timeout, and its requester then asks again.
const parkFor = 20 * time.Second

// ready says whether the cycle has something to decide.
func (cy *cycle) ready() bool {
	return len(cy.asks) > 0 || len(cy.parked) > 0 && (cy.wake || cy.closing)
}

// next waits until the cycle has something to decide or a parked ask is
// due, answers the parked asks that are due (or all, when the run is
// closing: asked again, they reach the next run), and returns the batch.
func (c *controller) next(ctx workflow.Context) ([]*ask, error) {
	cy := c.cycle
	if len(cy.parked) == 0 {
		if err := workflow.Await(ctx, cy.ready); err != nil {
			return nil, err
		}
	} else {
		due := cy.parked[0].until
		for _, a := range cy.parked {
			if a.until.Before(due) {
				due = a.until
			}
		}
		if d := due.Sub(workflow.Now(ctx)); d > 0 {
			if _, err := workflow.AwaitWithTimeout(ctx, d, cy.ready); err != nil {
				return nil, err
			}
		}
	}
	now := workflow.Now(ctx)
	if len(cy.parked) == 0 {
		cy.wake = false // nothing was waiting for the room
	}
	kept := cy.parked[:0]
	for _, a := range cy.parked {
		switch {
		case cy.closing:
			a.answer(Allocation{}, c.errContinuing())
		case !now.Before(a.until):
			a.answer(Allocation{}, a.waits)
		default:
			kept = append(kept, a)
		}
	}
	cy.parked = kept
	if cy.closing && cy.closeFast {
		for _, a := range cy.asks {
			a.answer(Allocation{}, c.errContinuing())
		}
		cy.asks = nil
	}
	batch := cy.asks
	cy.asks = nil
	if cy.wake {
		batch = append(batch, cy.parked...)
		cy.parked, cy.wake = nil, false
	}
	return batch, nil
}

// park holds a waiting work's ask open, or answers it with why it waits.
// Only an ask of work already queued is held (the first is answered, so
// its requester reports why it waits), and only one around no nodes and
// with no rule's refusal: those fall back or give up on their own.
func (c *controller) park(now time.Time, a *ask, queued bool, waits error) {
	if a.until.IsZero() && (!c.cycle.parks || !queued || len(a.req.Exclude) > 0 || len(a.denied) > 0 || c.cycle.closing) {
		a.answer(Allocation{}, waits)
		return
	}
	if a.until.IsZero() {
		a.until = now.Add(parkFor)
	}
	a.waits = waits
	c.cycle.parked = append(c.cycle.parked, a)
}

// unpark answers the parked asks of released work.
func (c *controller) unpark(job string) {
	c.cycle.parked = slices.DeleteFunc(c.cycle.parked, func(a *ask) bool {
		if a.req.JobID != job {
			return false
		}
		a.answer(Allocation{}, temporal.NewApplicationError("released while waiting", ErrNoCapacity))
		return true
	})
}

// startCycle runs the cycle's coroutine for the life of the run.
func (c *controller) startCycle(ctx workflow.Context) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			batch, err := c.next(ctx)
			if err != nil {
				return
			}
			if len(batch) == 0 {
				continue
			}
			c.cycle.busy = true
			c.decide(ctx, batch)
			c.cycle.busy = false
		}
	})
}

// askCycle is the allocate update with the cycle on: the request waits for
// the cycle that decides it.
func (c *controller) askCycle(ctx workflow.Context, req AllocateRequest) (Allocation, error) {
	c.cycle.updates++
	if a, ok := c.held(req.Jobs()...); ok { // idempotent for retried requests
		return a, nil
	}
	if req.Work == nil { // a request recorded before work descriptions
		return c.allocate(workflow.Now(ctx), req)
	}
	a := &ask{req: req}
	c.cycle.asks = append(c.cycle.asks, a)
	if err := workflow.Await(ctx, func() bool { return a.done }); err != nil {
		return Allocation{}, err
	}
	return a.out, a.err
}

// decide is one cycle over batch: the asks of one params (the bundle's, as
// the requesters' workers sent them) up to maxBatch; the rest, and asks to
// decide again, go back to the front of the line.
func (c *controller) decide(ctx workflow.Context, batch []*ask) {
	c.takeBuffered(ctx)
	now := workflow.Now(ctx)
	c.pruneQueue(now)
	var group, later []*ask
	ids := map[string]bool{}
	for _, a := range batch {
		if al, ok := c.held(a.req.Jobs()...); ok {
			a.answer(al, nil)
			continue
		}
		// A second ask of one work (its requester retried) is decided
		// next cycle: by then the first is held or queued.
		if ids[a.req.JobID] || len(group) == maxBatch || len(group) > 0 && !bytes.Equal(a.req.Params, group[0].req.Params) {
			later = append(later, a)
			continue
		}
		ids[a.req.JobID] = true
		group = append(group, a)
	}
	defer func() {
		c.cycle.asks = append(later, c.cycle.asks...)
		c.cycle.stats.Cycles++
		c.cycle.stats.Decided += len(group)
		c.cycle.stats.LastBatch = len(group)
	}()
	if len(group) == 0 {
		return
	}
	pp, err := placementParams(group[0].req) // the validator parsed them
	if err != nil {
		for _, a := range group {
			a.answer(Allocation{}, err)
		}
		return
	}
	c.params = pp

	plans := c.plan(now, pp, group)
	b := c.batchInput(now, pp)
	var asked []int // group indices the bundle is asked about
	for i, a := range group {
		if plans[i].Status != scheduler.Placed && len(a.denied) > 0 {
			c.denied(now, a) // no node is left that the rules did not refuse
			continue
		}
		if plans[i].Status == scheduler.Infeasible {
			c.enqueue(now, *a.req.Work, a.req.JobID, plans[i].Reason, false)
			a.answer(Allocation{}, temporal.NewApplicationError(plans[i].Reason, ErrInfeasible))
			continue
		}
		waited := int64(0)
		if w := c.st.Queue[a.req.JobID]; w != nil {
			waited = int64(now.Sub(w.Since).Seconds())
		}
		it := BatchItem{Work: policy.WorkInput(a.req.JobID, *a.req.Work, waited)}
		if plans[i].Status == scheduler.Placed {
			it.Placement = policy.PlacementInput(plans[i].Assignments)
		}
		b.Items = append(b.Items, it)
		asked = append(asked, i)
	}
	if len(asked) == 0 {
		return
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var verdicts []Verdict
	if err := workflow.ExecuteLocalActivity(lctx, admitBatch, b).Get(ctx, &verdicts); err != nil || len(verdicts) != len(asked) {
		if err == nil {
			err = fmt.Errorf("%d verdicts for %d works", len(verdicts), len(asked))
		}
		for _, i := range asked {
			group[i].answer(Allocation{}, fmt.Errorf("admission of %s: %w", group[i].req.JobID, err))
		}
		return
	}

	// Heartbeats and releases may have come in while the bundle decided:
	// what it admitted is placed again on the state as it is now and
	// committed only where the placement is the one it saw.
	c.takeBuffered(ctx)
	now = workflow.Now(ctx)
	var admitted []*ask
	var saw []scheduler.Placement
	for k, i := range asked {
		_, queued := c.st.Queue[group[i].req.JobID]
		a, v, p := group[i], verdicts[k], plans[i]
		switch {
		case v.Wait != "":
			c.enqueue(now, *a.req.Work, a.req.JobID, v.Wait, true)
			a.answer(Allocation{}, temporal.NewApplicationError("waiting on policy: "+v.Wait, ErrNoCapacity))
		case v.Deny != "":
			a.denied = append(a.denied, v.Deny)
			for _, as := range p.Assignments {
				a.req.Exclude = append(a.req.Exclude, as.Node)
			}
			later = c.again(now, a, later)
		case p.Status != scheduler.Placed:
			c.enqueue(now, *a.req.Work, a.req.JobID, p.Reason, false)
			c.park(now, a, queued, temporal.NewApplicationError("no node can take the job now: "+p.Reason, ErrNoCapacity))
		default:
			admitted = append(admitted, a)
			saw = append(saw, p)
		}
	}
	for j, p := range c.plan(now, pp, admitted) {
		a := admitted[j]
		if p.Status != scheduler.Placed || !reflect.DeepEqual(policy.PlacementInput(p.Assignments), policy.PlacementInput(saw[j].Assignments)) {
			later = c.again(now, a, later)
			continue
		}
		delete(c.st.Queue, a.req.JobID)
		c.commit(now, scheduler.Work{ID: a.req.JobID, Spec: *a.req.Work}, a.req, p.Assignments)
		al, _ := c.held(a.req.Jobs()...)
		a.answer(al, nil)
		c.cycle.stats.Placed++
	}
	c.st.Ledger.Prune(now, max(pp.QuotaWindow(), 24*time.Hour))
}

// again sends an ask to the next cycle, up to maxPlacementAsks cycles; then
// it waits in the queue with the rules' reasons (or is told the cluster
// kept changing) and its requester asks again later.
func (c *controller) again(now time.Time, a *ask, later []*ask) []*ask {
	a.tries++
	if a.tries < maxPlacementAsks {
		return append(later, a)
	}
	if len(a.denied) > 0 {
		c.denied(now, a)
		return later
	}
	a.answer(Allocation{}, temporal.NewApplicationError("no node can take the job now: the cluster kept changing while its placement was checked", ErrNoCapacity))
	return later
}

// denied answers an ask whose placements the bundle's rules refused: it
// waits in the queue with their reasons.
func (c *controller) denied(now time.Time, a *ask) {
	why := "policy: " + strings.Join(a.denied, "; ")
	c.enqueue(now, *a.req.Work, a.req.JobID, why, false)
	a.answer(Allocation{}, temporal.NewApplicationError("no node can take the job now: "+why, ErrNoCapacity))
}

// plan places asks in one pass with the queue (scheduler.Cycle) on the
// nodes as they are now. Queued work a policy rule holds takes nothing.
func (c *controller) plan(now time.Time, pp params.Params, asks []*ask) []scheduler.Placement {
	if len(asks) == 0 {
		return nil
	}
	in := make([]scheduler.Ask, len(asks))
	for i, a := range asks {
		since := now
		if w := c.st.Queue[a.req.JobID]; w != nil {
			since = w.Since
		}
		in[i] = scheduler.Ask{Exclude: a.req.Exclude, Item: scheduler.Item{
			Work: scheduler.Work{ID: a.req.JobID, Spec: *a.req.Work}, Priority: a.req.Work.Priority, Submitted: since}}
	}
	ids := make([]string, 0, len(c.st.Queue))
	for id, w := range c.st.Queue {
		if !w.Policy {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // deterministic order in workflow code
	queued := make([]scheduler.Item, len(ids))
	for i, id := range ids {
		w := c.st.Queue[id]
		queued[i] = scheduler.Item{Work: scheduler.Work{ID: id, Spec: w.Work}, Priority: w.Work.Priority, Submitted: w.Since}
	}
	return scheduler.New(pp).Cycle(now, c.schedulerNodes(nil), queued, in)
}

// batchInput is the snapshot a cycle's works are admitted on: the fleet,
// its inference endpoints and the usage over the quota window.
func (c *controller) batchInput(now time.Time, pp params.Params) Batch {
	nodes := c.schedulerNodes(nil)
	cl := policy.ClusterInput(nodes)
	cl.Endpoints = policy.EndpointsInput(c.st.Endpoints)
	return Batch{Cluster: cl, Usage: policy.UsageFromLedger(pp, nodes, c.st.Ledger.Quota(pp, now))}
}

// admitBatch names the local activity: a local activity is called by its
// registered name (the method needs the worker's Activities).
const admitBatch = "AdmitBatch"
