package cluster

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/ledger"
	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/scheduler"
)

// allocateUpdate handles the allocate update. A job moving off a node
// releases it and asks again at once; the SDK may run this handler before
// the main loop has taken that release, or the heartbeat saying the node
// drains, and the job was then handed back the node it left (an e2e drain
// test saw a run restored on a node under a preemption notice). So the
// signals already received are applied first.
func (c *controller) allocateUpdate(ctx workflow.Context, req AllocateRequest) (Allocation, error) {
	// Versioned: older histories allocated without taking them.
	if workflow.GetVersion(ctx, "allocate-takes-buffered-signals", workflow.DefaultVersion, 1) == 1 {
		c.takeBuffered(ctx)
	}
	if c.cycle != nil && c.cycle.on {
		return c.askCycle(ctx, req)
	}
	// Versioned: older histories took the admission decision from the
	// request (decided by the allocate activity on a status query, which
	// two concurrent requests could both pass before either committed).
	if workflow.GetVersion(ctx, "admit-in-cluster", workflow.DefaultVersion, 1) == 1 {
		return c.admitAndAllocate(ctx, req)
	}
	return c.allocate(workflow.Now(ctx), req)
}

// admitAndAllocate decides a work's admission on this workflow's own state
// and commits its placement before any other request is decided: one
// request at a time holds the lock across the decision (an activity: the
// policy bundle is the worker's) and the commit, so two trainings of
// one config, or two works that each fit a quota alone, cannot both pass.
func (c *controller) admitAndAllocate(ctx workflow.Context, req AllocateRequest) (Allocation, error) {
	if err := c.admitting.Lock(ctx); err != nil {
		return Allocation{}, err
	}
	defer c.admitting.Unlock()
	if req.Work != nil {
		if _, ok := c.held(req.Jobs()...); !ok {
			c.takeBuffered(ctx)
			pp, err := placementParams(req)
			if err != nil {
				return Allocation{}, err
			}
			// A regular activity, not a local one: the Go SDK does not
			// replay local activities inside update handlers (it waits
			// forever for their markers).
			actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
				StartToCloseTimeout: 30 * time.Second,
				RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
			})
			// Versioned: older histories asked the bundle about the work
			// alone, and its placement rules decided nothing live.
			if workflow.GetVersion(ctx, "placement-through-bundle", workflow.DefaultVersion, 1) == 1 {
				return c.admitPlacement(ctx, actx, pp, req)
			}
			in := c.status(workflow.Now(ctx)).AdmissionInput(pp, req.JobID, *req.Work)
			if err := workflow.ExecuteActivity(actx, (*Activities).Admit, in).Get(ctx, &req.PolicyWait); err != nil {
				return Allocation{}, fmt.Errorf("admission of %s: %w", req.JobID, err)
			}
		}
	}
	return c.allocate(workflow.Now(ctx), req)
}

// admitPlacement asks the bundle, in one activity, about the work and the
// placement the scheduler proposes for it, and commits that placement
// unless a rule of the bundle's placement_deny refuses it. A refused
// placement's nodes are left out and the next proposal is asked about;
// when none is left the work waits, the rules' reasons in the queue.
// Heartbeats and releases may change the state while the activity runs, so
// the placement is proposed again afterwards and committed only if it is
// the one the bundle saw; otherwise the new one is asked about.
func (c *controller) admitPlacement(ctx, actx workflow.Context, pp params.Params, req AllocateRequest) (Allocation, error) {
	work := scheduler.Work{ID: req.JobID, Spec: *req.Work}
	exclude := slices.Clone(req.Exclude)
	propose := func() []policy.Placed {
		now := workflow.Now(ctx)
		c.pruneQueue(now)
		if p := c.placeQueued(now, pp, exclude, work); p.Status == scheduler.Placed {
			return policy.PlacementInput(p.Assignments)
		}
		return nil
	}
	var denied []string
	placed := propose()
	for range maxPlacementAsks {
		in := c.status(workflow.Now(ctx)).AdmissionInput(pp, req.JobID, *req.Work)
		in.Placement = placed
		var v Verdict
		if err := workflow.ExecuteActivity(actx, (*Activities).AdmitPlacement, in).Get(ctx, &v); err != nil {
			return Allocation{}, fmt.Errorf("admission of %s: %w", req.JobID, err)
		}
		if v.Deny != "" && v.Wait == "" {
			denied = append(denied, v.Deny)
			for _, p := range placed {
				exclude = append(exclude, p.Node)
			}
			if placed = propose(); placed == nil {
				break
			}
			continue
		}
		if now := propose(); v.Wait == "" && !reflect.DeepEqual(now, placed) {
			placed = now
			continue
		}
		req.PolicyWait, req.Exclude = v.Wait, exclude
		return c.allocate(workflow.Now(ctx), req)
	}
	why := "the cluster kept changing while its placement was checked"
	if len(denied) > 0 {
		why = "policy: " + strings.Join(denied, "; ")
		c.enqueue(workflow.Now(ctx), work.Spec, req.JobID, why, false)
	}
	return Allocation{}, temporal.NewApplicationError("no node can take the job now: "+why, ErrNoCapacity)
}

// maxPlacementAsks bounds the placements one allocation asks the bundle
// about (refused ones, or ones the state changed under).
const maxPlacementAsks = 4

// releaseAll gives back the jobs a release names.
func (c *controller) releaseAll(now time.Time, r Release) {
	c.release(now, r.JobID)
	for _, j := range r.Also {
		c.release(now, j)
	}
}

// release gives back everything a work holds and ends its ledger records.
func (c *controller) release(now time.Time, job string) {
	for _, name := range c.st.Order {
		n := c.st.Nodes[name]
		for k, u := range n.Allocated {
			if k == job || u.Work == job {
				delete(n.Allocated, k)
			}
		}
		if n.Health == Healthy {
			n.Health = idleOrHealthy(n)
		}
	}
	delete(c.st.Queue, job)
	c.liftHolds(job)
	c.st.Ledger.Close(job, "", now)
	if c.cycle != nil {
		c.unpark(job)
		c.cycle.wake = true // its room may take parked work
	}
}

// liftHolds: when a training ends, the work of its config that a usage
// rule held (one training per config, a quota: whichever rules of the
// bundle say "waits") may be allowed now. Until its next request decides
// it again, it counts as waiting work that goes first, so younger work
// does not take its place in the meantime.
func (c *controller) liftHolds(job string) {
	config, found := "", false
	for _, r := range c.st.Ledger.Records {
		if r.WorkID == job && r.Running() && ledger.OneTrainingKind(r.Kind) {
			config, found = r.Config, true
			break
		}
	}
	if !found {
		return
	}
	for _, w := range c.st.Queue {
		if w.Policy && w.Work.Config == config {
			w.Policy = false
		}
	}
}

// allocate places a work with the scheduler's pipeline (feasibility
// filters, then scoring) over the nodes as they are now. A refusal says why
// for every node, and whether the work merely waits or could never fit.
// A work description is placed whole, after the waiting work that goes
// before it (queue order: priority plus the starvation boost, then age).
func (c *controller) allocate(now time.Time, req AllocateRequest) (Allocation, error) {
	if a, ok := c.held(req.Jobs()...); ok { // idempotent for retried requests
		return a, nil
	}
	pp, err := placementParams(req)
	if err != nil {
		return Allocation{}, err
	}
	c.params = pp
	c.pruneQueue(now)
	var p scheduler.Placement
	var work scheduler.Work
	if req.Work == nil { // a request recorded before work descriptions
		gpus := float64(req.GPUs)
		if req.GPUShare > 0 {
			gpus = req.GPUShare
		}
		work = scheduler.Work{ID: req.JobID, Spec: jobSpec(req.JobID, req.CPUs, gpus, req.MemoryMB)}
		p = scheduler.New(pp).Place(c.schedulerNodes(req.Exclude), work)
	} else {
		work = scheduler.Work{ID: req.JobID, Spec: *req.Work}
		if req.PolicyWait != "" {
			c.enqueue(now, work.Spec, req.JobID, req.PolicyWait, true)
			return Allocation{}, temporal.NewApplicationError("waiting on policy: "+req.PolicyWait, ErrNoCapacity)
		}
		p = c.placeQueued(now, pp, req.Exclude, work)
	}
	switch p.Status {
	case scheduler.Placed:
	case scheduler.Infeasible:
		if req.Work != nil {
			c.enqueue(now, work.Spec, req.JobID, p.Reason, false)
		}
		return Allocation{}, temporal.NewApplicationError(p.Reason, ErrInfeasible)
	default:
		if req.Work != nil {
			c.enqueue(now, work.Spec, req.JobID, p.Reason, false)
		}
		return Allocation{}, temporal.NewApplicationError("no node can take the job now: "+p.Reason, ErrNoCapacity)
	}
	delete(c.st.Queue, req.JobID)
	c.commit(now, work, req, p.Assignments)
	c.st.Ledger.Prune(now, max(pp.QuotaWindow(), 24*time.Hour))
	a, _ := c.held(req.Jobs()...)
	return a, nil
}

// commit records a placement on its nodes and opens its ledger records.
// One-instance work keeps the work id as its key (releases and retried
// requests find it by that); a gang's instances are keyed work/role#i,
// or, split, by their own job ids.
func (c *controller) commit(now time.Time, w scheduler.Work, req AllocateRequest, as []scheduler.Assignment) {
	for _, a := range as {
		workID, kind := w.ID, w.Spec.Kind
		split, isSplit := req.Split[InstanceKey(a.Role, a.Instance)]
		if isSplit {
			workID, kind = split.JobID, split.Kind
		}
		n := c.st.Nodes[a.Node]
		u := Usage{CPUs: a.CPUs, MemoryMB: a.MemoryMB, GPUShare: req.GPUShare, Owner: req.Owner}
		var held float64
		for _, g := range a.GPUs {
			u.GPUs = append(u.GPUs, g.Index)
			held += g.Share
			if g.Share < 1 {
				u.GPUShare = g.Share
			}
		}
		key := req.JobID
		if req.Work != nil {
			u.Work, u.Role, u.Instance, u.Labels = workID, a.Role, a.Instance, a.Labels
			switch {
			case isSplit:
				key = workID
			case len(as) > 1:
				key = fmt.Sprintf("%s/%s#%d", w.ID, a.Role, a.Instance)
			}
		}
		if n.Allocated == nil {
			n.Allocated = map[string]Usage{}
		}
		n.Allocated[key] = u
		n.Health = Healthy
		c.st.Ledger.Open(ledger.Entry{
			WorkID: workID, Config: w.Spec.Config, Kind: kind, Role: a.Role, Node: a.Node, Provider: n.Spec.Provider,
			NodeVRAMMB: n.Reported.TotalVRAMMB(), GPUs: held, Start: now,
		})
	}
}

// held is the allocation works already hold (a split gang's jobs
// together), if any.
func (c *controller) held(works ...string) (Allocation, bool) {
	var out Allocation
	for _, name := range c.st.Order {
		n := c.st.Nodes[name]
		var keys []string // most nodes hold none of works: nothing to allocate
		for k, u := range n.Allocated {
			if slices.Contains(works, k) || slices.Contains(works, u.Work) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			u := n.Allocated[k]
			out.Assignments = append(out.Assignments, Assigned{Role: u.Role, Instance: u.Instance, Node: name, Queue: NodeQueue(c.st.Name, name), GPUs: u.GPUs, Address: n.address()})
		}
	}
	if len(out.Assignments) == 0 {
		return Allocation{}, false
	}
	sort.SliceStable(out.Assignments, func(i, j int) bool {
		a, b := out.Assignments[i], out.Assignments[j]
		if a.Role != b.Role {
			return a.Role < b.Role
		}
		return a.Instance < b.Instance
	})
	first := out.Assignments[0]
	out.Node, out.Queue, out.GPUs = first.Node, first.Queue, first.GPUs
	if len(out.Assignments) == 1 && first.Role == "" {
		out.Assignments = nil // a request recorded before work descriptions
	}
	return out, true
}

// placementParams are the request's policy params, or the shipped
// defaults.
func placementParams(req AllocateRequest) (params.Params, error) {
	if len(req.Params) == 0 {
		return params.Default(), nil
	}
	p, err := params.Parse(req.Params)
	if err != nil {
		return params.Params{}, fmt.Errorf("allocate: params: %w", err)
	}
	return p, nil
}

// ErrInfeasible is the error type of a job no node could ever take.
const ErrInfeasible = "Infeasible"

// ErrNoCapacity is the error type of a refused allocation.
const ErrNoCapacity = "NoCapacity"
