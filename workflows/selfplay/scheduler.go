package selfplay

import (
	"fmt"
	"github.com/trainyard/trainyard/internal/selfplay/elo"
	"sort"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/selfplay/schedule"
	"github.com/trainyard/trainyard/workflows/job"
)

// SchedulerName is the scheduler workflow's type: the seed's
// SelfplayScheduler as a workflow. It gives a cluster's self-play slots to
// configs in slices of a few generations, each time to the config with the
// highest priority (schedule.Rank: curriculum weight × Elo velocity,
// starvation boost, quality gating, quotas), until every config meets its
// Elo target or it is stopped. Each slice is the config's SelfplayLoop as
// a child workflow continuing the loop's state (best model, Elo table,
// training window) from its previous slice.
const SchedulerName = "SelfplayScheduler"

// SchedulerID is a cluster's scheduler workflow id.
func SchedulerID(cluster string) string { return "selfplay-scheduler/" + cluster }

// ScheduledConfig is one config the scheduler may run.
type ScheduledConfig struct {
	Config     string  `json:"config"`
	GamePlugin string  `json:"game_plugin" doc:"sha256 of the game plugin."`
	Weight     float64 `json:"weight,omitempty" doc:"Curriculum weight (default 1)."`
	Quota      float64 `json:"quota,omitempty" doc:"Share of all slices (0: no quota)."`
	TargetElo  float64 `json:"target_elo,omitempty" doc:"Done once the best model reaches it (0: never)."`
}

// SchedulerInput starts (or, with State, continues) a scheduler.
type SchedulerInput struct {
	Cluster string            `json:"cluster"`
	Configs []ScheduledConfig `json:"configs"`
	// Settings are every loop's settings; Generations is ignored.
	Settings         Settings        `json:"settings"`
	Slots            int             `json:"slots,omitempty" doc:"Loops at once (default 1)."`
	SliceGenerations int             `json:"slice_generations,omitempty" doc:"Generations per slice (default 2)."`
	MaxSlices        int             `json:"max_slices,omitempty" doc:"Stop after this many slices (0: until the targets are met or stopped)."`
	Options          schedule.Tuning `json:"options,omitempty"`
	State            *SchedulerState `json:"state,omitempty"`
}

// SchedulerState is the scheduler's live state (the state query).
type SchedulerState struct {
	Phase   string                `json:"phase" enum:"running,stopped,done"`
	Slices  int                   `json:"slices"`
	Configs []schedule.ConfigStat `json:"configs"`
	Ranking []schedule.Scored     `json:"ranking" doc:"Priorities at the last decision, highest first."`
	History []SliceRecord         `json:"history" doc:"Recent slices, oldest first."`
	// Loops carries each config's loop state between slices.
	Loops   map[string]*State `json:"loops,omitempty"`
	LoopIDs map[string]string `json:"loop_ids,omitempty"`
}

// SliceRecord is one finished slice.
type SliceRecord struct {
	Config   string    `json:"config"`
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended"`
	Priority float64   `json:"priority"`
	Why      string    `json:"why"`
	Result   string    `json:"result" doc:"Generations run and the best model after, or the loop's error."`
}

// slicesPerRun bounds a scheduler run's history before continue-as-new.
const slicesPerRun = 20

// Scheduler runs slices until done, stopped or MaxSlices.
func Scheduler(ctx workflow.Context, in SchedulerInput) (SchedulerState, error) {
	if in.Slots <= 0 {
		in.Slots = 1
	}
	if in.SliceGenerations <= 0 {
		in.SliceGenerations = 2
	}
	st := in.State
	if st == nil {
		st = &SchedulerState{Loops: map[string]*State{}, LoopIDs: map[string]string{}, History: []SliceRecord{}}
		for _, c := range in.Configs {
			st.Configs = append(st.Configs, schedule.ConfigStat{Config: c.Config, Weight: c.Weight, Quota: c.Quota, TargetElo: c.TargetElo})
		}
	}
	st.Phase = "running"
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (SchedulerState, error) { return *st, nil }); err != nil {
		return *st, err
	}
	stop := false
	stops := workflow.GetSignalChannel(ctx, SignalStop)
	games := map[string]ScheduledConfig{}
	for _, c := range in.Configs {
		games[c.Config] = c
	}
	idx := func(cfg string) int {
		for i := range st.Configs {
			if st.Configs[i].Config == cfg {
				return i
			}
		}
		return -1
	}
	type running struct {
		rec SliceRecord
		fut workflow.ChildWorkflowFuture
	}
	active := map[string]*running{}
	runSlices := 0
	signalled := false
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(stops, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		stop = true
	})
	for {
		now := workflow.Now(ctx)
		st.Ranking = schedule.Rank(st.Configs, now, in.Options)
		for !stop && len(active) < in.Slots && runSlices < slicesPerRun && (in.MaxSlices == 0 || st.Slices+len(active) < in.MaxSlices) {
			cfg := schedule.Pick(st.Configs, now, in.Options)
			if cfg == "" {
				break
			}
			i := idx(cfg)
			loopID, ok := st.LoopIDs[cfg]
			if !ok {
				loopID = WorkflowID(in.Cluster, cfg) + "/" + workflow.GetInfo(ctx).OriginalRunID[:8]
				st.LoopIDs[cfg] = loopID
			}
			set := in.Settings
			prev := st.Loops[cfg]
			set.Generations = in.SliceGenerations
			if prev != nil {
				set.Generations += prev.Generation
			}
			var why string
			var prio float64
			for _, r := range st.Ranking {
				if r.Config == cfg {
					why, prio = r.Why, r.Priority
				}
			}
			cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
				WorkflowID:  WorkflowID(in.Cluster, cfg),
				TaskQueue:   workflow.GetInfo(ctx).TaskQueueName,
				RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
			})
			fut := workflow.ExecuteChildWorkflow(cctx, Name, Input{LoopID: loopID, Cluster: in.Cluster, Config: cfg, GamePlugin: games[cfg].GamePlugin, Settings: set, State: prev})
			r := &running{rec: SliceRecord{Config: cfg, Started: now, Priority: prio, Why: why}, fut: fut}
			active[cfg] = r
			st.Configs[i].Running = true
			sel.AddFuture(fut, func(f workflow.Future) {
				var res State
				err := f.Get(ctx, &res)
				c := &st.Configs[idx(r.rec.Config)]
				c.Running, c.Slices, c.LastRun = false, c.Slices+1, workflow.Now(ctx)
				r.rec.Ended = workflow.Now(ctx)
				if err != nil {
					c.Disabled = job.Reason(err)
					r.rec.Result = "failed: " + c.Disabled
				} else {
					st.Loops[r.rec.Config] = &res
					if res.Elo != nil {
						c.Velocity = velocity(ctx, res.Elo, r.rec.Config)
						if res.Best != "" {
							c.BestElo = res.Elo.Get(r.rec.Config, res.Best).Elo
						}
					}
					if n := len(res.Generations); n > 0 {
						c.Quality, c.QualityKnown = res.Generations[n-1].Quality.Score, true
					}
					if d := res.Durations["generation"]; d != nil {
						mean, _ := d.Predict()
						c.ExpectedSlice = mean * time.Duration(in.SliceGenerations)
					}
					r.rec.Result = fmt.Sprintf("generation %d, best %s (Elo %.0f, %.1f Elo/day)", res.Generation, res.Best, c.BestElo, c.Velocity)
				}
				st.Slices++
				runSlices++
				st.History = append(st.History, r.rec)
				if len(st.History) > maxGenerations {
					st.History = append([]SliceRecord(nil), st.History[len(st.History)-maxGenerations:]...)
				}
				delete(active, r.rec.Config)
			})
		}
		if len(active) == 0 {
			switch {
			case stop:
				st.Phase = "stopped"
				return *st, nil
			case in.MaxSlices > 0 && st.Slices >= in.MaxSlices, schedule.Pick(st.Configs, workflow.Now(ctx), in.Options) == "":
				st.Phase = "done"
				return *st, nil
			case runSlices >= slicesPerRun:
				in.State = st
				return *st, workflow.NewContinueAsNewError(ctx, SchedulerName, in)
			}
		}
		sel.Select(ctx)
		if stop && !signalled {
			// Loops stop after their generation in flight.
			signalled = true
			for _, cfg := range sortedKeys(active) {
				_ = workflow.SignalExternalWorkflow(ctx, WorkflowID(in.Cluster, cfg), "", SignalStop, nil).Get(ctx, nil)
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// velocity is a config's Elo/day for its priority: 0 while its best model's
// history spans less than an hour (before version 1, the slope of however
// many minutes there were, extrapolated to a day, which gave a young
// config a priority thousands of times its weight).
func velocity(ctx workflow.Context, t *elo.Table, config string) float64 {
	now := workflow.Now(ctx)
	if workflow.GetVersion(ctx, "velocity-min-span", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		c := t.Configs[config]
		if c == nil {
			return 0
		}
		v, _ := elo.Velocity(c.BestLog, now, 7*24*time.Hour)
		return v
	}
	v, _ := t.Velocity(config, now, 7*24*time.Hour)
	return v
}
