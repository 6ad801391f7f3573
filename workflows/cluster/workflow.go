package cluster

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/policy/params"
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

func (c *controller) event(now time.Time, format string, args ...any) {
	c.st.Events = append(c.st.Events, now.UTC().Format(time.RFC3339)+" "+fmt.Sprintf(format, args...))
	if len(c.st.Events) > maxEvents {
		c.st.Events = c.st.Events[len(c.st.Events)-maxEvents:]
	}
}
