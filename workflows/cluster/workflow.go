package cluster

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/joinkey"
	"github.com/trainyard/trainyard/internal/ledger"
	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/workspec"
)

// maxEvents bounds the event log kept in state.
const maxEvents = 50

// Workflow owns one cluster until it is brought down and stays down.
func Workflow(ctx workflow.Context, st State) error {
	st.Settings = st.Settings.withDefaults()
	if st.Nodes == nil {
		st.Nodes = map[string]*nodeState{}
	}
	// A cancel request (the Web UI offers one) must neither end the
	// cluster nor stall it: nodes, agents and jobs depend on it, and
	// `trainyard cluster down` is how a cluster ends. It is noted in the
	// events and otherwise ignored. Before, the cancelled context fired
	// every timer at once and the loop spun until the history limit.
	var cancelled workflow.ReceiveChannel
	if workflow.GetVersion(ctx, "ignore-cancel", workflow.DefaultVersion, 1) == 1 {
		cancelled = ctx.Done()
		ctx, _ = workflow.NewDisconnectedContext(ctx)
	}
	c := newController(ctx, &st)
	// Versioned: older histories judged every node by heartbeat signals.
	// Versioned (lease-groups): older histories held the leases in this
	// execution.
	on := workflow.GetVersion(ctx, "liveness-leases", workflow.DefaultVersion, 1) == 1
	c.leases = newLeases(ctx, on, on && workflow.GetVersion(ctx, "lease-groups", workflow.DefaultVersion, 1) == 1)
	if c.leases.groups {
		c.sendLeases(ctx)
	}
	for _, name := range st.Order {
		c.touchLease(name) // a run continued as new holds none yet
	}
	// Versioned: older histories decided each allocate update on its own
	// (admitAndAllocate).
	if c.cycle.on = workflow.GetVersion(ctx, "scheduling-cycle", workflow.DefaultVersion, 1) == 1; c.cycle.on {
		c.cycle.parks = workflow.GetVersion(ctx, "park-waiting-asks", workflow.DefaultVersion, 1) == 1
		c.cycle.closeFast = workflow.GetVersion(ctx, "closing-answers-asks", workflow.DefaultVersion, 1) == 1
		c.startCycle(ctx)
	}
	// Versioned: older histories dropped the records pruned beyond
	// ledger.MaxRecords, and their quotas forgot that GPU time.
	if workflow.GetVersion(ctx, "ledger-folds", workflow.DefaultVersion, 1) == 1 {
		st.Ledger.Folds = true
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) { return c.status(workflow.Now(ctx)), nil }); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatusPacked, func() (Packed, error) { return pack(c.status(workflow.Now(ctx))) }); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryRefusal, c.refusal); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryJoinKey, func() (string, error) { return c.st.Settings.JoinKey, nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateJoinKeys, c.joinKeys, workflow.UpdateHandlerOptions{Validator: c.validJoinKeys}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateAllocate, c.allocateUpdate, workflow.UpdateHandlerOptions{
		Validator: func(req AllocateRequest) error {
			if c.cycle.closing {
				return c.errContinuing()
			}
			if req.JobID == "" || req.CPUs < 0 || req.GPUs < 0 || req.MemoryMB < 0 {
				return errors.New("allocate: job_id required, resources must be >= 0")
			}
			if req.GPUShare != 0 && (!(req.GPUShare > 0 && req.GPUShare < 1) || req.GPUs != 0) {
				return errors.New("allocate: gpu_share must be in (0, 1), with gpus 0")
			}
			_, err := placementParams(req)
			return err
		},
	}); err != nil {
		return err
	}

	commands, beats, releases := workflow.GetSignalChannel(ctx, SignalCommand), c.beats, c.releases
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{ErrBadNode}},
	})

	// One command runs at a time, in arrival order, in its own coroutine so
	// that heartbeats and health ticks go on while it waits.
	running := false
	finished := workflow.NewBufferedChannel(ctx, 1)
	runNext := func() {
		if running || len(st.Pending) == 0 {
			return
		}
		cmd := st.Pending[0]
		st.Pending = st.Pending[1:]
		running = true
		workflow.Go(ctx, func(gctx workflow.Context) {
			c.run(gctx, actx, cmd)
			running = false
			finished.Send(gctx, true)
		})
	}

	tick := st.Settings.HeartbeatTimeout / 3
	var timer workflow.Future // one health tick pending at a time
	// Reservations always come back: every ReconcileEvery, on a health tick,
	// the workflows holding allocations are looked up, and what closed ones
	// hold is released (a terminated job, a run cancelled before its
	// allocate update committed). Versioned: older histories did not.
	rec := &reconciler{on: workflow.GetVersion(ctx, "reconcile-owners", workflow.DefaultVersion, 1) == 1,
		done: workflow.NewBufferedChannel(ctx, 1),
		actx: workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 2}})}
	for {
		runNext()
		c.syncLeases(ctx)
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(commands, func(ch workflow.ReceiveChannel, _ bool) {
			var cmd Command
			ch.Receive(ctx, &cmd)
			st.Pending = append(st.Pending, cmd)
		})
		sel.AddReceive(beats, func(ch workflow.ReceiveChannel, _ bool) {
			var hb Heartbeat
			ch.Receive(ctx, &hb)
			c.heartbeat(workflow.Now(ctx), hb)
		})
		sel.AddReceive(releases, func(ch workflow.ReceiveChannel, _ bool) {
			var r Release
			ch.Receive(ctx, &r)
			c.releaseAll(workflow.Now(ctx), r)
		})
		if timer == nil {
			timer = workflow.NewTimer(ctx, tick)
		}
		sel.AddFuture(timer, func(workflow.Future) {
			timer = nil
			c.checkHealth(workflow.Now(ctx))
			c.stopLate(ctx)
			rec.maybeStart(ctx, c)
		})
		sel.AddReceive(rec.done, func(ch workflow.ReceiveChannel, _ bool) {
			var closed []string
			ch.Receive(ctx, &closed)
			rec.running = false
			c.releaseOwners(workflow.Now(ctx), closed)
		})
		sel.AddReceive(finished, func(ch workflow.ReceiveChannel, _ bool) { ch.Receive(ctx, nil) })
		sel.AddReceive(c.leases.ended, func(ch workflow.ReceiveChannel, _ bool) {
			var e LeaseEnd
			ch.Receive(ctx, &e)
			c.leaseEnded(workflow.Now(ctx), e)
		})
		if cancelled != nil {
			sel.AddReceive(cancelled, func(ch workflow.ReceiveChannel, _ bool) {
				ch.Receive(ctx, nil)
				cancelled = nil
				c.event(workflow.Now(ctx), "cancel requested and ignored: a cluster ends with `trainyard cluster down`")
			})
		}
		sel.Select(ctx)

		if !running && len(st.Pending) == 0 && st.Desired == "down" && allStopped(st.Nodes) && commands.Len() == 0 {
			if c.letGoAll(ctx); commands.Len() == 0 {
				c.event(workflow.Now(ctx), "cluster is down; workflow completes")
				return nil
			}
		}
		if !running && (workflow.GetInfo(ctx).GetCurrentHistoryLength() > c.historyLimit() || c.cycle.updates >= maxRunUpdates) {
			if c.cycle.on {
				// The asks taken are answered in this run; new ones are
				// refused and asked again of the next.
				c.cycle.closing = true
				_ = workflow.Await(ctx, func() bool { return c.cycle.idle() && workflow.AllHandlersFinished(ctx) })
			}
			drain(ctx, commands, c)
			// By name: the SDK resolves a function to its short name,
			// "Workflow", which every workflow package shares, so passing
			// Workflow continued as whichever was registered last (Sweep).
			return workflow.NewContinueAsNewError(ctx, Name, st)
		}
	}
}

// historyLimit is the history length at which a run continues as new.
// With leases each run begins with one lease per live node, so the limit
// grows with them: a run must outlast its own start.
func (c *controller) historyLimit() int {
	if !c.leases.on || c.leases.groups {
		return c.st.Settings.HistoryLimit
	}
	return c.st.Settings.HistoryLimit + 4*len(c.leases.running)
}

func allStopped(nodes map[string]*nodeState) bool {
	for _, n := range nodes {
		if n.Health != Stopped && n.Health != Failed {
			return false
		}
	}
	return true
}

// drain takes every buffered signal before continue-as-new loses it.
func drain(ctx workflow.Context, commands workflow.ReceiveChannel, c *controller) {
	for {
		var cmd Command
		if !commands.ReceiveAsync(&cmd) {
			break
		}
		c.st.Pending = append(c.st.Pending, cmd)
	}
	c.takeBuffered(ctx)
}

type controller struct {
	st *State
	// beats and releases are the heartbeat and release signals; the main
	// loop takes them one at a time, allocateUpdate all that are waiting.
	beats, releases workflow.ReceiveChannel
	// params are the latest request's placement params: the status query
	// orders the queue with them.
	params params.Params
	// admitting is held from a request's admission decision to its commit.
	admitting workflow.Mutex
	// leases are the nodes' lease activities (lease.go).
	leases *leases
	// cycle is the scheduling cycle (cycle.go).
	cycle *cycle
}

func newController(ctx workflow.Context, st *State) *controller {
	return &controller{st: st, params: params.Default(), beats: workflow.GetSignalChannel(ctx, SignalHeartbeat), releases: workflow.GetSignalChannel(ctx, SignalRelease),
		admitting: workflow.NewMutex(ctx), leases: newLeases(ctx, false, false), cycle: &cycle{}}
}

// takeBuffered applies every heartbeat and release already received.
func (c *controller) takeBuffered(ctx workflow.Context) {
	for {
		var hb Heartbeat
		if !c.beats.ReceiveAsync(&hb) {
			break
		}
		c.heartbeat(workflow.Now(ctx), hb)
	}
	for {
		var r Release
		if !c.releases.ReceiveAsync(&r) {
			break
		}
		c.releaseAll(workflow.Now(ctx), r)
	}
	c.takeLeaseEnds(ctx)
}

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

func (c *controller) event(now time.Time, format string, args ...any) {
	c.st.Events = append(c.st.Events, now.UTC().Format(time.RFC3339)+" "+fmt.Sprintf(format, args...))
	if len(c.st.Events) > maxEvents {
		c.st.Events = c.st.Events[len(c.st.Events)-maxEvents:]
	}
}

func (c *controller) run(ctx, actx workflow.Context, cmd Command) {
	now := workflow.Now(ctx)
	switch cmd.Op {
	case OpUp:
		c.st.Desired = "up"
		if cmd.Spec != nil {
			c.merge(*cmd.Spec)
		}
		c.event(now, "up requested for %d node(s)", len(c.st.Order))
		c.bringUp(ctx, actx, c.st.Order)
	case OpDown:
		c.event(now, "down requested")
		c.st.Desired = "down"
		c.bringDown(ctx, actx, c.st.Order)
	case OpRestart:
		c.event(now, "restart requested")
		c.bringDown(ctx, actx, c.st.Order)
		c.st.Desired = "up"
		c.bringUp(ctx, actx, c.st.Order)
	case OpAdd:
		if cmd.Node == nil {
			return
		}
		if _, ok := c.st.Nodes[cmd.Node.Name]; ok {
			c.event(now, "add-node %s: already in the cluster", cmd.Node.Name)
			return
		}
		c.st.Nodes[cmd.Node.Name] = &nodeState{Spec: *cmd.Node, Health: Stopped}
		c.st.Order = append(c.st.Order, cmd.Node.Name)
		c.event(now, "node %s added", cmd.Node.Name)
		if c.st.Desired == "up" {
			c.bringUp(ctx, actx, []string{cmd.Node.Name})
		}
	case OpRemove:
		if _, ok := c.st.Nodes[cmd.Name]; !ok {
			c.event(now, "remove-node %s: no such node", cmd.Name)
			return
		}
		c.bringDown(ctx, actx, []string{cmd.Name})
		delete(c.st.Nodes, cmd.Name)
		c.touchLease(cmd.Name)
		c.st.Order = slices.DeleteFunc(c.st.Order, func(n string) bool { return n == cmd.Name })
		c.event(workflow.Now(ctx), "node %s removed", cmd.Name)
	case OpDrain, OpUndrain:
		c.drainNode(ctx, cmd)
	}
}

// drainNode marks a node draining (or not) and tells its agent, whose runs
// then checkpoint at once and move; an agent that cannot be reached is
// noted, and the mark alone still keeps new work off the node.
func (c *controller) drainNode(ctx workflow.Context, cmd Command) {
	now := workflow.Now(ctx)
	n, ok := c.st.Nodes[cmd.Name]
	if !ok {
		c.event(now, "%s %s: no such node", cmd.Op, cmd.Name)
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              NodeQueue(c.st.Name, cmd.Name),
		ScheduleToStartTimeout: 10 * time.Second,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	live := n.Health == Healthy || n.Health == Idle
	var err error
	if cmd.Op == OpDrain {
		n.Draining, n.DrainReason = true, fmt.Sprintf("drain requested (deadline %v)", cmd.Deadline)
		c.event(now, "node %s drains: %s", cmd.Name, n.DrainReason)
		if live {
			err = workflow.ExecuteActivity(actx, (*AgentActivities).DrainNode, DrainRequest{Reason: n.DrainReason, Deadline: now.Add(cmd.Deadline)}).Get(ctx, nil)
		}
	} else {
		if workflow.GetVersion(ctx, "undrain-ignores-stale-beats", workflow.DefaultVersion, 1) == 1 {
			// Beats the agent sent before it heard this still say it drains:
			// they must not mark the node draining again (they did, and
			// with the same agent nothing cleared it).
			n.Undrained = n.DrainReason
		}
		n.Draining, n.DrainReason = false, ""
		c.event(now, "node %s takes work again", cmd.Name)
		if live {
			err = workflow.ExecuteActivity(actx, (*AgentActivities).UndrainNode).Get(ctx, nil)
		}
	}
	if err != nil {
		c.event(workflow.Now(ctx), "%s %s: agent not told: %v", cmd.Op, cmd.Name, err)
		n.Undrained = "" // it drains still: its beats say so
	}
}

// merge takes nodes of a (re)submitted spec; nodes already known keep their
// runtime state, so `up` twice is a no-op.
func (c *controller) merge(s spec.Cluster) {
	c.st.Endpoints = slices.Clone(s.Endpoints) // the resubmitted spec's, as declared
	for _, n := range s.Nodes {
		if ns, ok := c.st.Nodes[n.Name]; ok {
			ns.Spec = n
			continue
		}
		c.st.Nodes[n.Name] = &nodeState{Spec: n, Health: Stopped}
		c.st.Order = append(c.st.Order, n.Name)
	}
}

func (c *controller) heartbeat(now time.Time, hb Heartbeat) {
	if c.cycle != nil {
		c.cycle.wake = true // a beat is a change: a node joined, came back or changed
	}
	n, ok := c.st.Nodes[hb.Node]
	keyID, why := c.refuse(n, hb)
	if !ok || why != "" {
		if !ok {
			why = "unknown node"
		}
		c.refused(now, hb, why)
		return
	}
	c.st.Refused = slices.DeleteFunc(c.st.Refused, func(r Refusal) bool { return r.AgentID == hb.AgentID })
	n.LastSeq, n.KeyID = hb.Seq, keyID
	if n.Health == Stopped && c.st.Desired == "down" {
		return // a late beat from an agent being stopped
	}
	if n.Health == Dead {
		c.event(now, "node %s is back", hb.Node)
	}
	if !n.RegisterBy.IsZero() {
		n.RegisterBy = time.Time{}
		c.event(now, "node %s registered (agent pid %d)", hb.Node, hb.PID)
	}
	switch {
	case hb.Draining != "" && !n.Draining && hb.Draining == n.Undrained && hb.AgentID == n.AgentID:
		// Sent before the agent heard the operator's undrain.
	case hb.Draining != "" && !n.Draining:
		c.event(now, "node %s drains: %s", hb.Node, hb.Draining)
		n.Draining, n.DrainReason = true, hb.Draining
	case hb.Draining == "" && n.DrainReason != "" && hb.AgentID != n.AgentID:
		// A new agent process (the node came back after its drain).
		c.event(now, "node %s takes work again: a new agent", hb.Node)
		n.Draining, n.DrainReason = false, ""
	}
	if hb.Draining == "" || hb.AgentID != n.AgentID {
		n.Undrained = ""
	}
	if hb.AgentID != n.AgentID {
		n.NoLease = false // a new agent process: it may hold one
	}
	n.LastBeat, n.AgentID, n.AgentPID, n.Reported, n.GPUUtil = now, hb.AgentID, hb.PID, hb.Resources, hb.GPUUtil
	// The advertised address goes into peers' environments (MASTER_ADDR)
	// and URLs (the LLM loop's pool): only an IP address is taken, never a
	// string that could carry a port, path or shell word.
	n.Address = ""
	if a, err := netip.ParseAddr(hb.Address); err == nil && a.Zone() == "" {
		n.Address = a.String()
	}
	if n.Health != Stopped {
		n.Health, n.Error = idleOrHealthy(n), ""
	}
	c.touchLease(hb.Node)
}

// refused records a refused heartbeat: one event for an agent's first (its
// later ones every few seconds would push everything else out), and the
// agent's Refusal, which status shows and the agent queries.
func (c *controller) refused(now time.Time, hb Heartbeat, why string) {
	i := slices.IndexFunc(c.st.Refused, func(r Refusal) bool { return r.AgentID == hb.AgentID && r.Node == hb.Node })
	if i < 0 {
		c.event(now, "refused heartbeats from node %q (agent %s, pid %d): %s", hb.Node, hb.AgentID, hb.PID, why)
		if len(c.st.Refused) >= maxRefused {
			c.st.Refused = slices.Delete(c.st.Refused, 0, 1)
		}
		c.st.Refused = append(c.st.Refused, Refusal{Node: hb.Node, AgentID: hb.AgentID, PID: hb.PID, First: now})
		i = len(c.st.Refused) - 1
	}
	r := &c.st.Refused[i]
	r.Reason, r.Last = why, now
	r.Count++
}

// refusal answers QueryRefusal.
func (c *controller) refusal(agentID string) (*Refusal, error) {
	for _, r := range c.st.Refused {
		if r.AgentID == agentID {
			return &r, nil
		}
	}
	return nil, nil
}

// refuse says why hb is not from an agent holding a join token of the
// cluster ("" when it is, with the ID of the added token it signed with,
// "" for the cluster's own): a bad signature, or a sequence number already
// seen (a replay of a heartbeat read from the history).
func (c *controller) refuse(n *nodeState, hb Heartbeat) (keyID, why string) {
	s := c.st.Settings
	if s.JoinKey == "" {
		if hb.Secret != s.JoinSecret {
			return "", "wrong join secret"
		}
		return "", ""
	}
	signed := joinkey.Verify(s.JoinKey, hb.Node, hb.AgentID, hb.Seq, hb.Sig)
	for _, k := range c.st.JoinKeys {
		if signed {
			break
		}
		if signed = joinkey.Verify(k.Public, hb.Node, hb.AgentID, hb.Seq, hb.Sig); signed {
			keyID = k.ID
		}
	}
	switch {
	case !signed:
		return "", "not signed with a join token of this cluster (a revoked one, another cluster's, or none)"
	case n != nil && hb.Seq <= n.LastSeq:
		return "", "replayed or out-of-order heartbeat (sequence not above the last one)"
	}
	return keyID, ""
}

// joinKeys answers UpdateJoinKeys: it adds or revokes one token and
// returns the tokens the cluster accepts besides its own. A revoked
// token's agents are refused from their next heartbeat on.
func (c *controller) joinKeys(ctx workflow.Context, req JoinKeysRequest) ([]JoinKey, error) {
	return c.changeJoinKeys(workflow.Now(ctx), req), nil
}

func (c *controller) changeJoinKeys(now time.Time, req JoinKeysRequest) []JoinKey {
	if req.Add != "" {
		k := JoinKey{ID: JoinKeyID(req.Add), Public: req.Add, Name: req.Name, Added: now}
		c.st.JoinKeys = append(c.st.JoinKeys, k)
		c.event(now, "join token %s added%s", k.ID, nameSuffix(k.Name))
	}
	if req.Revoke != "" {
		i := slices.IndexFunc(c.st.JoinKeys, func(k JoinKey) bool { return k.ID == req.Revoke })
		k := c.st.JoinKeys[i]
		c.st.JoinKeys = slices.Delete(c.st.JoinKeys, i, i+1)
		var nodes []string
		for _, name := range c.st.Order {
			if n := c.st.Nodes[name]; n.KeyID == k.ID {
				nodes = append(nodes, name)
				// Its lease goes: its beats, refused from now on,
				// decide its health (Dead once its last accepted beat
				// is heartbeat_timeout old).
				n.NoLease = true
				c.touchLease(name)
			}
		}
		c.event(now, "join token %s%s revoked; its agents are refused from now on (nodes %v)", k.ID, nameSuffix(k.Name), nodes)
	}
	return slices.Clone(c.st.JoinKeys)
}

// validJoinKeys is UpdateJoinKeys' validator: one change, a well-formed
// public key not there yet, or a revocation of a token there.
func (c *controller) validJoinKeys(req JoinKeysRequest) error {
	switch {
	case (req.Add == "") == (req.Revoke == ""):
		return errors.New("join keys: add or revoke one token")
	case req.Add != "":
		if !joinkey.ValidPublic(req.Add) {
			return errors.New("join keys: add: not an Ed25519 public key in hex")
		}
		if req.Add == c.st.Settings.JoinKey || slices.ContainsFunc(c.st.JoinKeys, func(k JoinKey) bool { return k.ID == JoinKeyID(req.Add) }) {
			return errors.New("join keys: add: the cluster has that token already")
		}
		if len(c.st.JoinKeys) >= MaxJoinKeys {
			return fmt.Errorf("join keys: the cluster accepts %d tokens besides its own already: revoke one first", MaxJoinKeys)
		}
		if len(req.Name) > 64 {
			return errors.New("join keys: name longer than 64 characters")
		}
	case req.Revoke == JoinKeyID(c.st.Settings.JoinKey):
		return errors.New("join keys: revoke: that is the cluster's own token, which its local and SSH agents use: bring the cluster down and up for a new one")
	case !slices.ContainsFunc(c.st.JoinKeys, func(k JoinKey) bool { return k.ID == req.Revoke }):
		return fmt.Errorf("join keys: revoke: the cluster has no token %q", req.Revoke)
	}
	return nil
}

func nameSuffix(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}

func idleOrHealthy(n *nodeState) Health {
	if len(n.Allocated) > 0 {
		return Healthy
	}
	return Idle
}

// checkHealth marks nodes Dead whose heartbeats stopped and takes their
// allocations back: the jobs holding them re-allocate elsewhere.
func (c *controller) checkHealth(now time.Time) {
	for _, name := range c.st.Order {
		n := c.st.Nodes[name]
		if n.Health != Healthy && n.Health != Idle || c.judgedByLease(n) {
			continue
		}
		if now.Sub(n.LastBeat) > c.st.Settings.HeartbeatTimeout {
			c.declareDead(now, name, fmt.Sprintf("no heartbeat for %v", now.Sub(n.LastBeat).Round(time.Second)))
		}
	}
}

// declareDead marks a node Dead and takes its allocations back: the jobs
// holding them re-allocate elsewhere.
func (c *controller) declareDead(now time.Time, name, why string) {
	n := c.st.Nodes[name]
	n.Health, n.Error = Dead, why
	var jobs []string
	for j := range n.Allocated {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	n.Allocated = nil
	c.st.Ledger.Close("", name, now)
	c.touchLease(name)
	c.event(now, "node %s is Dead (%s); handed back %d job(s): %v", name, n.Error, len(jobs), jobs)
}

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

// ErrInfeasible is the error type of a job no node could ever take.
const ErrInfeasible = "Infeasible"

// ErrNoCapacity is the error type of a refused allocation.
const ErrNoCapacity = "NoCapacity"

func usage(n *nodeState) Usage {
	var u Usage
	keys := make([]string, 0, len(n.Allocated))
	for k := range n.Allocated {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic order in workflow code
	held := map[int]float64{}
	shared := false
	for _, k := range keys {
		a := n.Allocated[k]
		u.CPUs += a.CPUs
		u.MemoryMB += a.MemoryMB
		for _, g := range a.shares() {
			if _, ok := held[g.Index]; !ok {
				u.GPUs = append(u.GPUs, g.Index)
			}
			held[g.Index] += g.Share
			shared = shared || g.Share < 1
		}
	}
	if shared { // a shared device is listed once; its parts say how full it is
		for _, g := range u.GPUs {
			u.GPUParts = append(u.GPUParts, scheduler.GPUShare{Index: g, Share: held[g]})
		}
	}
	return u
}

func (c *controller) status(now time.Time) Status {
	s := Status{Cluster: c.st.Name, Now: now, Ledger: slices.Clone(c.st.Ledger.Records), LedgerFolded: slices.Clone(c.st.Ledger.Folded), Queue: c.queue(now), Desired: c.st.Desired, Busy: len(c.st.Pending) > 0, Events: slices.Clone(c.st.Events), Endpoints: slices.Clone(c.st.Endpoints), Refused: slices.Clone(c.st.Refused)}
	s.Totals.ByHealth = map[Health]int{}
	if c.cycle != nil && c.cycle.on {
		cs := c.cycle.stats
		cs.Waiting, cs.Parked = len(c.cycle.asks), len(c.cycle.parked)
		s.Cycle = &cs
	}
	for _, k := range c.st.JoinKeys {
		ks := JoinKeyStatus{JoinKey: k}
		for _, name := range c.st.Order {
			if c.st.Nodes[name].KeyID == k.ID {
				ks.Nodes = append(ks.Nodes, name)
			}
		}
		s.JoinKeys = append(s.JoinKeys, ks)
	}
	for _, name := range c.st.Order {
		n := c.st.Nodes[name]
		u := usage(n)
		res := n.Reported
		if n.LastBeat.IsZero() {
			res = n.Spec.Resources
		}
		ns := NodeStatus{
			Name: name, Provider: n.Spec.Provider, Provisioner: n.Spec.Provisioner.Kind, Ephemeral: n.Spec.Ephemeral, Labels: n.Spec.Labels,
			Health: n.Health, Error: n.Error, Draining: n.Draining, DrainReason: n.DrainReason, Resources: res, Used: u, GPUUtil: n.GPUUtil, AgentPID: n.AgentPID,
			Address: n.address(),
		}
		if n.Health == Pending {
			s.Busy = true
		}
		if !n.LastBeat.IsZero() {
			t := n.LastBeat
			ns.LastHeartbeat = &t
			ns.GPUsDiffer = gpusDiffer(n.Spec.Resources.GPUs, n.Reported.GPUs)
		}
		for j := range n.Allocated {
			ns.Jobs = append(ns.Jobs, j)
		}
		sort.Strings(ns.Jobs)
		for _, j := range ns.Jobs {
			ns.Allocations = append(ns.Allocations, n.Allocated[j].allocation(j))
		}
		s.Nodes = append(s.Nodes, ns)
		s.Totals.Nodes++
		s.Totals.ByHealth[n.Health]++
		if n.Health == Healthy || n.Health == Idle {
			s.Totals.CPUs += res.CPUs
			s.Totals.MemoryMB += res.MemoryMB
			s.Totals.GPUs += len(res.GPUs)
			s.Totals.CPUsUsed += u.CPUs
			s.Totals.MemoryMBUsed += u.MemoryMB
			s.Totals.GPUsUsed += len(u.GPUs)
		}
	}
	return s
}

func rootCause(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

// address is where the node's peers reach it: what its agent advertises
// (it knows its own route; a spec's address may be a name only the control
// plane resolves), else the spec's.
func (n *nodeState) address() string {
	if n.Address != "" {
		return n.Address
	}
	return n.Spec.Address
}
