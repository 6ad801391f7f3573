package selfplay

import (
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/selfplay/alerts"
	"github.com/trainyard/trainyard/internal/selfplay/populate"
	"github.com/trainyard/trainyard/workflows/job"
)

// PopulatorName is the queue populator's workflow type: the seed's
// QueuePopulator. Per cluster it runs one populator-driven loop per config
// (Input.Queued) and, every poll, reads the loops' states (work done and
// queued by kind, best Elo, velocity) and tops their queues up with the
// kinds that keep each config at the target mix (populate.Populate), the
// configs with the highest priority first (starved ones boosted); a config
// whose best met its Elo target gets no more work and its loop is stopped.
// It evaluates the seed's alert table on what it reads.
const PopulatorName = "SelfplayPopulator"

// PopulatorID is a cluster's populator workflow id.
func PopulatorID(cluster string) string { return "selfplay-populator/" + cluster }

// PopulatorInput starts (or, with State, continues) a populator.
type PopulatorInput struct {
	Cluster string            `json:"cluster"`
	Configs []ScheduledConfig `json:"configs" doc:"Configs it populates (weight and target_elo are used; quota is not)."`
	// Settings are every loop's settings; Generations is ignored.
	Settings Settings                 `json:"settings"`
	Tuning   populate.PopulatorTuning `json:"tuning,omitempty"`
	Alerts   alerts.Thresholds        `json:"alerts,omitempty"`
	Poll     time.Duration            `json:"poll,omitempty" doc:"How often it looks at the loops, in ns (default 30s)."`
	State    *PopulatorState          `json:"state,omitempty"`
}

// PopulatorEvent is one decision.
type PopulatorEvent struct {
	At     time.Time `json:"at"`
	Config string    `json:"config,omitempty"`
	Kind   string    `json:"kind,omitempty"`
	What   string    `json:"what"`
}

// PopulatorState is the populator's live state (the state query).
type PopulatorState struct {
	Phase     string            `json:"phase" enum:"running,stopped,done"`
	Polls     int               `json:"polls"`
	LastPoll  *time.Time        `json:"last_poll,omitempty"`
	LastError string            `json:"last_error,omitempty"`
	Plans     []populate.Plan   `json:"plans" doc:"Per config at the last look: priority and why, state, target and actual mix, work done and queued by kind."`
	Loops     []LoopView        `json:"loops" doc:"The loops as last seen."`
	Events    []PopulatorEvent  `json:"events" doc:"Recent decisions, oldest first."`
	Alerts    []alerts.Alert    `json:"alerts" doc:"Alert conditions that hold, firing first."`
	Tracker   alerts.Tracker    `json:"tracker,omitempty" doc:"Since when each condition holds."`
	LoopIDs   map[string]string `json:"loop_ids,omitempty" doc:"The loops it started, by config."`
	Stopped   map[string]bool   `json:"stopped,omitempty" doc:"Loops it stopped (Elo target met)."`
	NextID    int               `json:"next_id"`
}

// populatorPollsPerRun bounds a run's history before continue-as-new.
const populatorPollsPerRun = 300

// Populator populates until every config met its target or it is stopped.
func Populator(ctx workflow.Context, in PopulatorInput) (PopulatorState, error) {
	if in.Poll <= 0 {
		in.Poll = 30 * time.Second
	}
	tune := in.Tuning.WithDefaults()
	st := in.State
	if st == nil {
		st = &PopulatorState{LoopIDs: map[string]string{}, Stopped: map[string]bool{}, Tracker: alerts.Tracker{}, NextID: 1}
	}
	st.Phase = "running"
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (PopulatorState, error) { return *st, nil }); err != nil {
		return *st, err
	}
	stop := false
	stops := workflow.GetSignalChannel(ctx, SignalStop)
	event := func(e PopulatorEvent) {
		e.At = workflow.Now(ctx)
		st.Events = append(st.Events, e)
		if len(st.Events) > maxGenerations {
			st.Events = append([]PopulatorEvent(nil), st.Events[len(st.Events)-maxGenerations:]...)
		}
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{ErrFailed}},
	})
	byName := map[string]ScheduledConfig{}
	var names []string
	for _, c := range in.Configs {
		byName[c.Config] = c
		names = append(names, c.Config)
	}
	set := in.Settings
	set.Generations = 0
	for polls := 0; ; polls++ {
		for stops.ReceiveAsync(nil) {
			stop = true
		}
		if stop {
			for _, c := range names {
				if st.LoopIDs[c] != "" && !st.Stopped[c] {
					_ = workflow.SignalExternalWorkflow(ctx, WorkflowID(in.Cluster, c), "", SignalStop, nil).Get(ctx, nil)
				}
			}
			event(PopulatorEvent{What: "stopped: its loops stop after the item in flight"})
			st.Phase = "stopped"
			return *st, nil
		}
		if polls >= populatorPollsPerRun {
			in.State = st
			return *st, workflow.NewContinueAsNewError(ctx, PopulatorName, in)
		}
		var view PopulatorView
		err := workflow.ExecuteActivity(actx, (*Activities).SelfplayPopulatorLook, PopulatorLook{Cluster: in.Cluster, Configs: names}).Get(ctx, &view)
		now := workflow.Now(ctx)
		if err != nil {
			st.LastError = "look: " + job.Reason(err)
		} else {
			st.Polls++
			st.LastPoll = &now
			if done := st.populate(ctx, actx, in, set, tune, byName, view, now, event); done {
				st.Phase = "done"
				event(PopulatorEvent{What: "every config met its Elo target"})
				return *st, nil
			}
		}
		timer := workflow.NewTimer(ctx, in.Poll)
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) {})
		sel.AddReceive(stops, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			stop = true
		})
		sel.Select(ctx)
	}
}

// populate is one look's decisions: start missing loops, queue work,
// stop loops whose config met its target, evaluate the alerts. It reports
// whether every config met its target.
func (st *PopulatorState) populate(ctx, actx workflow.Context, in PopulatorInput, set Settings, tune populate.PopulatorTuning,
	byName map[string]ScheduledConfig, view PopulatorView, now time.Time, event func(PopulatorEvent)) bool {
	st.LastError = ""
	var cfgs []populate.Config
	for i := range view.Loops {
		lv := &view.Loops[i]
		sc := byName[lv.Config]
		c := populate.Config{Config: lv.Config, Weight: sc.Weight, TargetElo: sc.TargetElo, Done: populate.Counts{}, Queue: lv.Queue,
			Fresh: lv.Fresh, Candidate: lv.Candidate, BestElo: lv.BestElo, HasBest: lv.Best != "", Velocity: lv.Velocity}
		for k, n := range lv.WorkDone {
			c.Done[k] = n
		}
		if lv.LastWork != nil {
			c.LastWork = *lv.LastWork
		}
		ours := st.LoopIDs[lv.Config] != "" && lv.LoopID == st.LoopIDs[lv.Config]
		switch {
		case lv.Running && !ours:
			c.Closed = "a loop the populator did not start runs for this config: " + lv.Status
		case lv.Running && !lv.Queued:
			c.Closed = "the loop is not driven by a populator"
		case !lv.Running && st.LoopIDs[lv.Config] != "" && !c.Met():
			c.Closed = "its loop ended " + lv.Status + ": " + lv.Reason
		case !lv.Running && !c.Met():
			loopID := WorkflowID(in.Cluster, lv.Config) + "/" + runTag(ctx)
			err := workflow.ExecuteActivity(actx, (*Activities).SelfplayStartLoop, Input{
				LoopID: loopID, Cluster: in.Cluster, Config: lv.Config, GamePlugin: sc.GamePlugin, Settings: set, Queued: true,
			}).Get(ctx, nil)
			if err != nil {
				c.Closed = "start loop: " + job.Reason(err)
				st.LastError = c.Closed
				event(PopulatorEvent{Config: lv.Config, What: c.Closed})
				break
			}
			st.LoopIDs[lv.Config] = loopID
			lv.Running, lv.Queued, lv.LoopID, lv.Status = true, true, loopID, "running"
			event(PopulatorEvent{Config: lv.Config, What: "started loop " + loopID})
		}
		cfgs = append(cfgs, c)
	}
	plans, decisions := populate.Populate(cfgs, now, tune)
	st.Plans, st.Loops = plans, view.Loops
	items := map[string][]WorkItem{}
	for _, d := range decisions {
		items[d.Config] = append(items[d.Config], WorkItem{ID: st.NextID, Kind: d.Kind, Queued: now, Why: d.Why})
		st.NextID++
	}
	for _, c := range sortedKeys(items) {
		err := workflow.SignalExternalWorkflow(ctx, WorkflowID(in.Cluster, c), "", SignalWork, items[c]).Get(ctx, nil)
		if err != nil {
			st.LastError = fmt.Sprintf("queue work for %s: %s", c, job.Reason(err))
			event(PopulatorEvent{Config: c, What: st.LastError})
			continue
		}
		for _, it := range items[c] {
			event(PopulatorEvent{Config: c, Kind: it.Kind, What: fmt.Sprintf("queued #%d %s: %s", it.ID, it.Kind, it.Why)})
		}
	}
	allMet := len(plans) > 0
	queued := 0
	for i, p := range plans {
		queued += p.Queued.Total()
		if p.State != "met" {
			allMet = false
			continue
		}
		if st.LoopIDs[p.Config] != "" && !st.Stopped[p.Config] && view.Loops[i].Running {
			_ = workflow.SignalExternalWorkflow(ctx, WorkflowID(in.Cluster, p.Config), "", SignalStop, nil).Get(ctx, nil)
			st.Stopped[p.Config] = true
			event(PopulatorEvent{Config: p.Config, What: p.Why + ": loop stopped"})
		}
	}
	st.Alerts = st.Tracker.Observe(samples(in.Cluster, view, queued, now), now, in.Alerts)
	return allMet
}

// samples are the alert table's measurements: the populated queue's
// depth, each node's self-play rate over its latest batch of the last
// hour, each config's Elo velocity once it has a best model and an hour of
// its history, each GPU's
// utilisation where its agent reports one.
func samples(cluster string, view PopulatorView, queued int, now time.Time) []alerts.Sample {
	out := []alerts.Sample{{Rule: alerts.QueueDepth, Subject: cluster, Value: float64(queued)}}
	type rate struct {
		at    time.Time
		value float64
	}
	latest := map[string]rate{}
	for _, l := range view.Loops {
		for _, w := range l.Recent {
			if w.Kind != populate.Selfplay || w.Skipped || w.Ended == nil || w.Node == "" || now.Sub(*w.Ended) > time.Hour {
				continue
			}
			d := w.Ended.Sub(w.Started).Hours()
			if d <= 0 {
				continue
			}
			if r, ok := latest[w.Node]; !ok || w.Ended.After(r.at) {
				latest[w.Node] = rate{*w.Ended, float64(w.Games) / d}
			}
		}
		if l.Best != "" && !l.TooEarly {
			out = append(out, alerts.Sample{Rule: alerts.EloVelocity, Subject: l.Config, Value: l.Velocity})
		}
	}
	nodes := make([]string, 0, len(latest))
	for n := range latest {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		out = append(out, alerts.Sample{Rule: alerts.Throughput, Subject: n, Value: latest[n].value})
	}
	for _, g := range view.GPUs {
		out = append(out, alerts.Sample{Rule: alerts.GPUUtil, Subject: fmt.Sprintf("%s/%d", g.Node, g.Index), Value: float64(g.Util)})
	}
	return out
}

// runTag is 8 characters of the populator's first run id, naming the
// loops it starts (the test environment's run ids may be shorter).
func runTag(ctx workflow.Context) string {
	id := workflow.GetInfo(ctx).OriginalRunID
	if id == "" {
		id = workflow.GetInfo(ctx).WorkflowExecution.RunID
	}
	return (id + "00000000")[:8]
}
