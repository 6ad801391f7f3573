// Package fleetload drives one control plane with a fleet of simulated
// ("hollow") nodes, like kubemark: it starts `trainyard dev`, brings up a
// cluster of static nodes, starts `trainyard agent --simulate` for them
// (or one real agent per node, the reference), submits jobs at a rate and
// measures what the fleet costs the control plane: time to join, health
// flaps, submission and placement latency, API latency under load, CPU,
// memory, Temporal's database and the cluster workflow's history.
//
// It is a library so that `make scale` (internal/tools/scale) and the
// correctness test (internal/e2e) run the same scenario; it never exits
// the process, and stops everything it started before Run returns.
package fleetload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/trainyard/trainyard/internal/temporalx"
)

// Options is one run at one fleet size. Zero values take the defaults
// noted.
type Options struct {
	Nodes int // fleet size (required)
	Jobs  int // jobs to submit (0: none; the fleet only joins and idles)
	// Rate is the most submissions per second (default 50); Workers the
	// goroutines submitting (default 32).
	Rate    float64
	Workers int
	// MaxOpen, when > 0, holds submissions while that many accepted jobs
	// have not ended: a closed loop at what the control plane sustains
	// (the correctness test), where Rate alone is an open loop (the load).
	MaxOpen int
	// Each job sleeps a duration drawn from [MinDuration, MaxDuration].
	MinDuration, MaxDuration time.Duration
	// Churn is how many times a minute one agent process is killed
	// (SIGKILL: its nodes are lost) and restarted ChurnDowntime later
	// (default 20 s: past the 15 s heartbeat timeout, so they go Dead).
	// The fleet is then split into ChurnGroups processes per node shape
	// (default 4). 0: no churn.
	Churn         float64
	ChurnGroups   int
	ChurnDowntime time.Duration
	// DevBinary runs the control plane, AgentBinary the agents (default
	// bin/trainyard both): an older control plane can face today's agents.
	DevBinary   string
	AgentBinary string
	// RealAgents starts one `trainyard agent --node` process per node
	// instead of `--simulate` processes (small fleets: the reference).
	RealAgents bool
	// AgentArgs are more flags for every agent process.
	AgentArgs []string
	// GPUEvery: one node in this many has 2 GPUs (default 4; -1 none):
	// the last ones, so that each shape is one range of names, one
	// --simulate process.
	GPUEvery int
	// Dir holds the data dir and every log; a temporary one (removed
	// after) when empty.
	Dir string
	// Cluster and NodePrefix name the cluster and its nodes (default
	// "fleet", "hollow").
	Cluster    string
	NodePrefix string
	Seed       uint64
	// Idle is how long the joined fleet idles before the first job: the
	// heartbeats' cost at rest, alone in the history's first minutes.
	Idle time.Duration
	// Poll is how often the status and the other routes are sampled
	// (default 2 s). StatusOnly leaves the other routes (usage, runs,
	// queue, a job) alone: each is a query of the cluster workflow, a
	// cost the correctness test need not add.
	Poll       time.Duration
	StatusOnly bool
	// JoinTimeout bounds the wait for every node to be up (default 2 min
	// plus 100 ms a node); DrainTimeout the wait for every job to end
	// after the last submission (default MaxDuration + 10 min).
	JoinTimeout  time.Duration
	DrainTimeout time.Duration
	// CheckRate bounds the Temporal calls following jobs (default 100/s).
	CheckRate float64
	// Logf reports progress (default: none).
	Logf func(format string, args ...any)
}

func (o Options) withDefaults() (Options, error) {
	if o.Nodes <= 0 {
		return o, errors.New("fleetload: Nodes must be > 0")
	}
	if o.MaxDuration < o.MinDuration || o.MinDuration < 0 {
		return o, fmt.Errorf("fleetload: durations %v..%v: want 0 <= min <= max", o.MinDuration, o.MaxDuration)
	}
	def := func(v *float64, d float64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Rate, 50)
	def(&o.CheckRate, 100)
	o.Workers = orDefault(o.Workers, 32)
	o.ChurnGroups = orDefault(o.ChurnGroups, 4)
	o.GPUEvery = orDefault(o.GPUEvery, 4)
	if o.GPUEvery < 0 {
		o.GPUEvery = 0
	}
	o.ChurnDowntime = orDefault(o.ChurnDowntime, 20*time.Second)
	o.Poll = orDefault(o.Poll, 2*time.Second)
	o.JoinTimeout = orDefault(o.JoinTimeout, 2*time.Minute+time.Duration(o.Nodes)*100*time.Millisecond)
	o.DrainTimeout = orDefault(o.DrainTimeout, o.MaxDuration+10*time.Minute)
	o.DevBinary = orDefaultStr(o.DevBinary, "bin/trainyard")
	o.AgentBinary = orDefaultStr(o.AgentBinary, o.DevBinary)
	o.Cluster = orDefaultStr(o.Cluster, "fleet")
	o.NodePrefix = orDefaultStr(o.NodePrefix, "hollow")
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	var err error
	if o.DevBinary, err = filepath.Abs(o.DevBinary); err == nil {
		o.AgentBinary, err = filepath.Abs(o.AgentBinary)
	}
	return o, err
}

// orDefault is v, or d when v is zero.
func orDefault[T int | time.Duration](v, d T) T {
	if v == 0 {
		return d
	}
	return v
}

func orDefaultStr(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// run is one Run's state.
type run struct {
	o       Options
	dir     string
	dev     *dev
	api     *apiClient
	tc      client.Client
	fleet   *fleet
	watch   *watcher
	res     *Result
	agentT0 time.Time // the agents' start: the measured window begins
	cpu0    float64
	mu      sync.Mutex // Result.Problems: the churn reports from its goroutine
}

// Run runs the scenario once. Its error is for a run that could not be
// set up (dev did not start, the cluster did not come up); what goes
// wrong while it runs is in Result.Problems.
func Run(ctx context.Context, o Options) (*Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &run{o: o, res: &Result{Size: o.Nodes, RealAgents: o.RealAgents, DevBinary: o.DevBinary, AgentBinary: o.AgentBinary, Started: time.Now(), API: map[string]Latency{}}}
	defer r.cleanup()
	if err := r.setup(ctx); err != nil {
		return r.res, err
	}
	r.load(ctx)
	r.res.WallSeconds = round1(time.Since(r.res.Started).Seconds())
	return r.res, nil
}

// setup starts dev, brings the cluster up and dials Temporal.
func (r *run) setup(ctx context.Context) error {
	r.dir = r.o.Dir
	if r.dir == "" {
		d, err := os.MkdirTemp("", "fleetload-")
		if err != nil {
			return fmt.Errorf("fleetload: temp dir: %w", err)
		}
		r.dir = d
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return fmt.Errorf("fleetload: %w", err)
	}
	r.o.Logf("fleetload: %d nodes, %d jobs; dev %s; logs in %s", r.o.Nodes, r.o.Jobs, r.o.DevBinary, r.dir)
	d, err := startDev(ctx, r.o.DevBinary, filepath.Join(r.dir, "data"), r.dir, 90*time.Second)
	if err != nil {
		return err
	}
	r.dev = d
	r.api = newAPIClient(d.ep.API, d.admin)
	ns := orDefaultStr(d.ep.Namespace, "default")
	if r.tc, err = temporalx.Dial(ctx, temporalx.Options{Address: d.ep.Temporal, Namespace: ns, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		return err
	}
	parts := 1
	if r.o.Churn > 0 {
		parts = r.o.ChurnGroups
	}
	groups := layout(r.o.NodePrefix, r.o.Nodes, r.o.GPUEvery, parts)
	for _, g := range groups {
		if g.GPUs != noGPUs {
			r.res.GPUNodes += g.Count
		}
	}
	if err := d.clusterUp(ctx, r.o.DevBinary, filepath.Join(r.dir, "cluster.yaml"), clusterSpec(r.o.Cluster, groups)); err != nil {
		return err
	}
	env, err := d.agentEnv(ctx, r.o.DevBinary, r.o.Cluster)
	if err != nil {
		return err
	}
	r.fleet = newFleet(r.o.AgentBinary, r.o.Cluster, r.dir, env, r.o.RealAgents, r.o.AgentArgs, groups)
	r.watch = newWatcher(r.api, r.o.Cluster, r.fleet.nodes(), d.pid())
	return nil
}

// load joins the fleet, submits the jobs, waits for them to end and
// measures.
func (r *run) load(ctx context.Context) {
	r.baseline()
	if err := r.fleet.startAll(); err != nil {
		r.problem("start agents: %v", err)
		return
	}
	r.res.AgentProcs = len(r.fleet.pids())
	r.join(ctx)

	lctx, stop := context.WithCancel(ctx)
	defer stop()
	tr := newTracker(r.tc, orDefaultStr(r.dev.ep.Namespace, "default"), r.o.CheckRate)
	sub := newSubmitter(r.api, r.o.Rate, r.o.Workers, tr.add)
	sub.maxOpen, sub.open = r.o.MaxOpen, tr.remaining
	smp := newSampler(r.api, r.o.Cluster, sub.jobIDs)
	watch := []func(context.Context){func(c context.Context) { r.watch.run(c, r.o.Poll) }, tr.run}
	if !r.o.StatusOnly {
		watch = append(watch, func(c context.Context) { smp.run(c, r.o.Poll) })
	}
	bg := background(lctx, watch...)
	churnDone := background(lctx, r.churn)
	if r.o.Idle > 0 {
		r.o.Logf("fleetload: idling %v", r.o.Idle)
		sleep(lctx, r.o.Idle)
	}
	sub.run(lctx, r.jobs())
	r.res.Submit = sub.summary(r.o.Jobs)
	if r.res.Submit.Stopped {
		r.problem("submissions stopped after %d POSTs in a row went unanswered (%v): the control plane stopped answering", sub.breaker, r.res.Submit.Errors)
	}
	r.o.Logf("fleetload: %d/%d jobs accepted (%d answers 429); waiting for them to end", r.res.Submit.Accepted, r.o.Jobs, r.res.Submit.Status429)
	if !tr.waitAll(lctx, r.o.DrainTimeout, r.o.Logf) {
		when := fmt.Sprintf("%v after the last submission", r.o.DrainTimeout)
		if ctx.Err() != nil {
			when = "when the run was cut short (" + ctx.Err().Error() + ")"
		}
		r.problem("%d of %d jobs still open %s", tr.remaining(), r.res.Submit.Accepted, when)
	}
	r.o.Logf("fleetload: %d jobs ended; measuring", r.res.Submit.Accepted-tr.remaining())
	stop()
	bg()
	churnDone()
	r.res.Placement = summarizePlacements(tr.records())
	r.res.API[routeStatus] = r.watch.lat.summary()
	r.res.API[routeSubmit] = r.res.Submit.Latency
	for route, s := range smp.routes {
		r.res.API[route] = s.summary()
	}
	// The end is measured even when ctx ran out: a run that timed out
	// still reports what it saw (reading a thousand nodes' history of
	// heartbeat signals takes minutes).
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	r.finish(fctx)
}

// background runs each fn in a goroutine; the returned func waits for
// them (they end with ctx).
func background(ctx context.Context, fns ...func(context.Context)) (wait func()) {
	done := make(chan struct{}, len(fns))
	for _, fn := range fns {
		go func() {
			fn(ctx)
			done <- struct{}{}
		}()
	}
	return func() {
		for range fns {
			<-done
		}
	}
}

// baseline records the control plane's CPU and database before the
// agents start.
func (r *run) baseline() {
	if u, err := usageOf(r.dev.pid()); err == nil {
		r.cpu0 = u.CPUSeconds
	}
	r.res.ControlPlane.DBStartMiB = mib(dbSize(r.dev.dir))
	r.agentT0 = time.Now()
}

// join waits until every node is up.
func (r *run) join(ctx context.Context) {
	died := func() bool { return len(r.fleet.exited()) > 0 }
	if r.watch.waitAllUp(ctx, r.o.JoinTimeout, died) {
		r.res.JoinSeconds = round1(r.watch.upSince().Sub(r.agentT0).Seconds())
		r.o.Logf("fleetload: all %d nodes up after %.1fs", r.o.Nodes, r.res.JoinSeconds)
		return
	}
	r.res.JoinSeconds = -1
	st, _ := r.watch.latest()
	up := 0
	for _, n := range st.Nodes {
		if n.up() {
			up++
		}
	}
	r.problem("only %d of %d nodes up after %v", up, r.o.Nodes, r.o.JoinTimeout)
	for _, e := range r.fleet.exited() {
		r.problem("%s", e)
	}
}

// jobs draws the load's jobs.
func (r *run) jobs() []jobSpec {
	rng := rand.New(rand.NewPCG(r.o.Seed, r.o.Seed^0x9e3779b97f4a7c15))
	out := make([]jobSpec, r.o.Jobs)
	for i := range out {
		out[i] = mix(rng, r.o.Cluster, r.o.MinDuration, r.o.MaxDuration, r.res.GPUNodes > 0)
	}
	return out
}

// churn kills one agent process (round robin) every 1/Churn minutes and
// restarts it ChurnDowntime later.
func (r *run) churn(ctx context.Context) {
	if r.o.Churn <= 0 {
		return
	}
	every := time.Duration(float64(time.Minute) / r.o.Churn)
	for i := 0; ; i++ {
		sleep(ctx, every)
		if ctx.Err() != nil {
			return
		}
		g := i % len(r.fleet.groups)
		r.watch.markChurned(r.fleet.groups[g].nodes())
		r.o.Logf("fleetload: churn: killing the agents of %v", r.fleet.groups[g])
		r.fleet.stop(g, syscall.SIGKILL)
		r.res.Health.Churns++
		sleep(context.WithoutCancel(ctx), r.o.ChurnDowntime)
		if err := r.fleet.start(g); err != nil {
			r.problem("churn: restart %v: %v", r.fleet.groups[g], err)
		}
	}
}

// finish waits for the cluster to give every allocation back, then
// measures the control plane and reads the cluster workflow's history.
func (r *run) finish(ctx context.Context) {
	end := r.settle(ctx)
	r.res.End = end
	if !end.clean() {
		r.problem("the cluster still holds work after every job ended: %d allocations, %d jobs, %d queued, %.1f CPUs, %d GPUs", end.Allocations, end.Jobs, end.Queue, end.CPUsUsed, end.GPUsUsed)
	}
	tEnd := time.Now()
	r.o.Logf("fleetload: reading the cluster workflow's history")
	h := r.watch.health()
	h.Churns = r.res.Health.Churns
	r.res.Health = h
	r.measureControlPlane(tEnd)
	w, err := readClusterHistory(ctx, r.tc, orDefaultStr(r.dev.ep.Namespace, "default"), ClusterWorkflowPrefix+r.o.Cluster, r.agentT0, tEnd, r.o.Nodes)
	if err != nil {
		r.problem("cluster workflow history: %v", err)
	}
	r.res.Workflow = w
	p := r.res.Placement
	if p.Lost > 0 || p.NeverPlaced > 0 || p.MultiPlaced > 0 || p.WrongOutcome > 0 {
		r.problem("jobs: %d lost, %d never placed, %d placed more than once %v, %d ended otherwise than their command", p.Lost, p.NeverPlaced, p.MultiPlaced, p.MultiPlacedJobs, p.WrongOutcome)
	}
}

// settle polls the status (and the queue) until nothing holds the
// cluster, for up to 30 s: releases are signals the workflow takes in
// after the jobs closed.
func (r *run) settle(ctx context.Context) End {
	var e End
	for deadline := time.Now().Add(30 * time.Second); ; {
		e = r.snapshot(ctx)
		if e.clean() || time.Now().After(deadline) || ctx.Err() != nil {
			return e
		}
		sleep(ctx, time.Second)
	}
}

func (r *run) snapshot(ctx context.Context) End {
	var e End
	if !r.watch.poll(ctx) {
		e.Queue = -1
		return e
	}
	st, _ := r.watch.latest()
	e.Allocations, e.Jobs = st.held()
	e.CPUsUsed, e.GPUsUsed = st.Totals.CPUsUsed, st.Totals.GPUsUsed
	for _, n := range st.Nodes {
		if n.up() {
			e.Up++
		}
	}
	var q clusterQueue
	if err := r.api.call(ctx, "GET", "/v1/clusters/"+r.o.Cluster+"/queue", nil, &q); err == nil {
		e.Queue = max(len(q.Waiting), len(st.Queue))
	} else {
		e.Queue = len(st.Queue)
	}
	return e
}

// measureControlPlane reads dev's CPU time and memory, and the database.
func (r *run) measureControlPlane(tEnd time.Time) {
	cp := &r.res.ControlPlane
	if u, err := usageOf(r.dev.pid()); err == nil {
		cp.CPUSeconds = round1(u.CPUSeconds - r.cpu0)
		cp.RSSEndMiB = mib(u.RSSBytes)
		if secs := tEnd.Sub(r.agentT0).Seconds(); secs > 0 {
			cp.CPUCores = float64(int(cp.CPUSeconds/secs*100)) / 100
		}
	} else {
		r.problem("control plane usage: %v", err)
	}
	r.watch.mu.Lock()
	cp.RSSMaxMiB = mib(r.watch.maxRSS)
	r.watch.mu.Unlock()
	cp.DBEndMiB = mib(dbSize(r.dev.dir))
	cp.DBGrowthMiB = round1(cp.DBEndMiB - cp.DBStartMiB)
}

// cleanup stops the agents, then dev, and removes a temporary dir.
func (r *run) cleanup() {
	t0 := time.Now()
	defer func() { r.o.Logf("fleetload: stopped in %.1fs", time.Since(t0).Seconds()) }()
	// Slow exits are logged, not problems: the load is over.
	if r.fleet != nil {
		if killed := r.fleet.stopAll(syscall.SIGTERM); len(killed) > 0 {
			r.o.Logf("fleetload: %v still ran %v after SIGTERM: killed", killed, stopGrace)
		}
	}
	if r.tc != nil {
		r.tc.Close()
	}
	if r.dev != nil && !r.dev.stop(syscall.SIGTERM, stopGrace) {
		r.o.Logf("fleetload: trainyard dev still ran %v after SIGTERM: killed", stopGrace)
	}
	if r.o.Dir == "" && r.dir != "" {
		os.RemoveAll(r.dir)
	}
}

func (r *run) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.res.Problems = append(r.res.Problems, msg)
	r.mu.Unlock()
	r.o.Logf("fleetload: problem: %s", msg)
}

func mib(b int64) float64 { return round1(float64(b) / (1 << 20)) }
