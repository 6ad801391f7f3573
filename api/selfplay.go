package api

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/selfplay/elo"
	"github.com/trainyard/trainyard/internal/selfplay/schedule"
	"github.com/trainyard/trainyard/internal/workspec"
	"github.com/trainyard/trainyard/workflows/selfplay"
)

// SelfplayStart starts a self-play loop for one game config on a cluster.
type SelfplayStart struct {
	Cluster  string            `json:"cluster" minLength:"1" doc:"Cluster whose nodes play, train and evaluate."`
	Config   string            `json:"config" minLength:"1" example:"square8_2p" doc:"Game config: board and player count."`
	Game     string            `json:"game,omitempty" doc:"Game plugin (sha256, name@version or name); default kinrow-<config>."`
	Settings selfplay.Settings `json:"settings,omitempty"`
}

// SelfplaySummary is one loop in a listing.
type SelfplaySummary struct {
	ID         string     `json:"id" example:"lab/square8_2p" doc:"CLUSTER/CONFIG."`
	Cluster    string     `json:"cluster"`
	Config     string     `json:"config"`
	Status     string     `json:"status" enum:"running,completed,failed,canceled,terminated,continued_as_new,timed_out,unknown"`
	StartTime  time.Time  `json:"start_time"`
	CloseTime  *time.Time `json:"close_time,omitempty"`
	Phase      string     `json:"phase,omitempty"`
	Generation int        `json:"generation"`
	Best       string     `json:"best,omitempty"`
	BestElo    float64    `json:"best_elo,omitempty"`
}

// SelfplayLive is the self-play batch in flight, from its heartbeat.
type SelfplayLive = selfplay.PlayProgress

// Selfplay is one loop in full.
type Selfplay struct {
	SelfplaySummary
	LoopID       string            `json:"loop_id" doc:"The loop's S3 prefix (see docs/selfplay.md)."`
	GamePlugin   string            `json:"game_plugin"`
	Settings     selfplay.Settings `json:"settings"`
	State        selfplay.State    `json:"state"`
	Live         *SelfplayLive     `json:"live,omitempty" doc:"Progress of the self-play batch in flight."`
	Velocity     float64           `json:"elo_velocity" doc:"Elo/day of the best model over the last 7 days (0 while too early: see elo_velocity_note)."`
	VelocityNote string            `json:"elo_velocity_note,omitempty" doc:"Why there is no velocity yet: the best model's history spans less than an hour."`
	Error        string            `json:"error,omitempty"`
}

// LeaderboardEntry is one model's rating in a config.
type LeaderboardEntry struct {
	elo.Rating
	Loop string `json:"loop,omitempty" doc:"The loop (CLUSTER/CONFIG) that rated it; empty for the random anchor."`
}

// Leaderboard is one config's ratings.
type Leaderboard struct {
	Config       string             `json:"config"`
	Velocity     float64            `json:"elo_velocity" doc:"Elo/day of the config's best model over the last 7 days (the most recent loop; 0 while too early: see elo_velocity_note)."`
	VelocityNote string             `json:"elo_velocity_note,omitempty" doc:"Why there is no velocity yet: the best model's history spans less than an hour."`
	Entries      []LeaderboardEntry `json:"entries" doc:"Highest rated first."`
	Matches      []elo.Match        `json:"matches,omitempty" doc:"Match history, oldest first (with history=true)."`
}

type selfplayOutput struct{ Body Selfplay }

type startSelfplayInput struct{ Body SelfplayStart }

type listSelfplayInput struct {
	Limit int `query:"limit" default:"100" minimum:"1" maximum:"1000"`
}

type listSelfplayOutput struct {
	Body struct {
		Loops []SelfplaySummary `json:"loops"`
	}
}

type stopSelfplayInput struct {
	Cluster string `path:"cluster"`
	Config  string `path:"config"`
	Now     bool   `query:"now" doc:"Cancel at once instead of after the generation in flight."`
}

type leaderboardInput struct {
	Config  string `query:"config" doc:"Only this config; empty: every config with a loop."`
	History bool   `query:"history" doc:"Include the match history."`
}

type leaderboardOutput struct {
	Body struct {
		Leaderboards []Leaderboard `json:"leaderboards"`
	}
}

type selfplayIDInput struct {
	Cluster string `path:"cluster"`
	Config  string `path:"config"`
}

func (s *Server) registerSelfplay() {
	s.registerSelfplaySchedules()
	s.registerSelfplayIdle()
	start := op(http.MethodPost, "/v1/selfplay", "start-selfplay",
		"Start a self-play loop for a game config on a cluster: self-play → quality gate → NPZ export → training → gauntlet → Elo and promotion, generation after generation",
		auth.Operator, "selfplay")
	start.DefaultStatus = http.StatusCreated
	huma.Register(s.API, start, s.startSelfplay)

	huma.Register(s.API, op(http.MethodGet, "/v1/selfplay", "list-selfplay", "List self-play loops, newest first", auth.Viewer, "selfplay"),
		func(ctx context.Context, in *listSelfplayInput) (*listSelfplayOutput, error) {
			loops, err := s.listSelfplay(ctx, in.Limit)
			if err != nil {
				return nil, err
			}
			out := &listSelfplayOutput{}
			out.Body.Loops = loops
			return out, nil
		})

	huma.Register(s.API, op(http.MethodGet, "/v1/selfplay/{cluster}/{config}", "get-selfplay",
		"A loop's phase, generations (games, quality score, export, candidate, gauntlet, Elo), best model and Elo table", auth.Viewer, "selfplay"),
		func(ctx context.Context, in *selfplayIDInput) (*selfplayOutput, error) {
			sp, err := s.getSelfplay(ctx, in.Cluster, in.Config)
			if err != nil {
				return nil, err
			}
			return &selfplayOutput{Body: sp}, nil
		})

	stop := op(http.MethodPost, "/v1/selfplay/{cluster}/{config}/stop", "stop-selfplay",
		"Stop a loop after its current generation (now=true: at once; the generation in flight is abandoned, its synced games stay in S3)", auth.Operator, "selfplay")
	stop.DefaultStatus = http.StatusAccepted
	huma.Register(s.API, stop, func(ctx context.Context, in *stopSelfplayInput) (*selfplayOutput, error) {
		id := selfplay.WorkflowID(in.Cluster, in.Config)
		var err error
		if in.Now {
			err = s.d.Temporal.CancelWorkflow(ctx, id, "")
		} else {
			err = s.d.Temporal.SignalWorkflow(ctx, id, "", selfplay.SignalStop, nil)
		}
		if err != nil {
			return nil, temporalErr("self-play loop "+in.Cluster+"/"+in.Config, err)
		}
		sp, err := s.getSelfplay(ctx, in.Cluster, in.Config)
		if err != nil {
			return nil, err
		}
		return &selfplayOutput{Body: sp}, nil
	})

	huma.Register(s.API, op(http.MethodGet, "/v1/selfplay/leaderboard", "selfplay-leaderboard",
		"Elo leaderboard per game config across its loops, with Elo velocity and (history=true) the match history", auth.Viewer, "selfplay"),
		func(ctx context.Context, in *leaderboardInput) (*leaderboardOutput, error) {
			boards, err := s.leaderboards(ctx, in.Config, in.History)
			if err != nil {
				return nil, err
			}
			out := &leaderboardOutput{}
			out.Body.Leaderboards = boards
			return out, nil
		})
}

// startSelfplay validates a loop, resolves its game plugin and submits it.
func (s *Server) startSelfplay(ctx context.Context, in *startSelfplayInput) (*selfplayOutput, error) {
	b := in.Body
	set := b.Settings.WithDefaults()
	if err := settingsErr(set); err != nil {
		return nil, err
	}
	if strings.ContainsAny(b.Cluster+b.Config, "/ ") {
		return nil, huma.Error422UnprocessableEntity("invalid self-play loop", &huma.ErrorDetail{Location: "body.config", Message: "cluster and config must not contain '/' or spaces", Value: b.Config})
	}
	ref := b.Game
	if ref == "" {
		ref = "kinrow-" + b.Config
	}
	rec, err := s.runPlugin(ctx, "body.game", ref, pluginhost.KindGame)
	if err != nil {
		return nil, err
	}
	if rec.Metadata.Name != ref && !strings.HasSuffix(rec.Metadata.Name, "-"+b.Config) && rec.Metadata.Name != b.Config {
		return nil, huma.Error422UnprocessableEntity("game plugin does not play this config", &huma.ErrorDetail{
			Location: "body.game", Message: fmt.Sprintf("plugin %s plays %s, not %s", rec.Metadata.Label(), rec.Metadata.Name, b.Config), Value: ref})
	}
	id := selfplay.WorkflowID(b.Cluster, b.Config)
	var units []unit
	for _, w := range selfplay.LoopWork(id, b.Config, set) {
		u := unit{id: w.Name, what: "self-play loop", loc: "body", work: w}
		switch w.Kind {
		case workspec.KindTraining:
			u.what, u.loc = "self-play loop's training", "body.settings.model.trainer_resources"
		case workspec.KindEvaluation:
			u.what, u.loc = "self-play loop's gauntlet", "body.settings.model.evaluator_resources"
		}
		units = append(units, u)
	}
	err = s.submit(ctx, submission{
		cluster: b.Cluster,
		units:   units,
		start: func(ctx context.Context) error {
			loopID := id + "/" + uuid.NewString()[:8]
			_, err := selfplay.StartLoop(ctx, s.d.Temporal, selfplay.Input{LoopID: loopID, Cluster: b.Cluster, Config: b.Config, GamePlugin: rec.ID, Settings: b.Settings})
			if temporal.IsWorkflowExecutionAlreadyStartedError(err) {
				return huma.Error409Conflict(fmt.Sprintf("a self-play loop for %s on cluster %s is already running; stop it first", b.Config, b.Cluster))
			}
			if err != nil {
				return temporalErr("start self-play loop", err)
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	sp, err := s.getSelfplay(ctx, b.Cluster, b.Config)
	if err != nil {
		return nil, err
	}
	return &selfplayOutput{Body: sp}, nil
}

func (s *Server) listSelfplay(ctx context.Context, limit int) ([]SelfplaySummary, error) {
	resp, err := s.d.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: s.d.Namespace, PageSize: int32(limit), Query: "WorkflowType = '" + selfplay.Name + "'",
	})
	if err != nil {
		return nil, temporalErr("list self-play loops", err)
	}
	out := []SelfplaySummary{}
	seen := map[string]bool{}
	for _, e := range resp.GetExecutions() {
		w := summary(e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), e.GetType().GetName(), e.GetStatus(), "", e.GetStartTime().AsTime(), e.GetCloseTime())
		if w.Status == "continued_as_new" {
			continue // its successor (same id) is listed
		}
		sum := SelfplaySummary{Status: w.Status, StartTime: w.StartTime, CloseTime: w.CloseTime}
		for k, p := range e.GetMemo().GetFields() {
			var v string
			_ = converter.GetDefaultDataConverter().FromPayload(p, &v)
			switch k {
			case "cluster":
				sum.Cluster = v
			case "config":
				sum.Config = v
			}
		}
		sum.ID = sum.Cluster + "/" + sum.Config
		if seen[w.WorkflowID+w.RunID] {
			continue
		}
		seen[w.WorkflowID+w.RunID] = true
		if st, err := s.selfplayState(ctx, w.WorkflowID, w.RunID); err == nil {
			fillSummary(&sum, st)
		}
		out = append(out, sum)
	}
	return out, nil
}

func fillSummary(sum *SelfplaySummary, st selfplay.State) {
	sum.Phase, sum.Generation, sum.Best = st.Phase, st.Generation, st.Best
	if st.Elo != nil && st.Best != "" {
		sum.BestElo = st.Elo.Get(sum.Config, st.Best).Elo
	}
}

// selfplayState asks a loop (running or closed) for its state.
func (s *Server) selfplayState(ctx context.Context, id, runID string) (selfplay.State, error) {
	var st selfplay.State
	v, err := s.d.Temporal.QueryWorkflow(ctx, id, runID, selfplay.QueryState)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

func (s *Server) getSelfplay(ctx context.Context, clusterName, config string) (Selfplay, error) {
	var sp Selfplay
	id := selfplay.WorkflowID(clusterName, config)
	what := "self-play loop " + clusterName + "/" + config
	desc, err := s.d.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return sp, temporalErr(what, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	w := summary(id, info.GetExecution().GetRunId(), info.GetType().GetName(), info.GetStatus(), "", info.GetStartTime().AsTime(), info.GetCloseTime())
	if w.Type != selfplay.Name {
		return sp, huma.Error404NotFound(what + ": not found")
	}
	sp.ID, sp.Cluster, sp.Config, sp.Status, sp.StartTime, sp.CloseTime = clusterName+"/"+config, clusterName, config, w.Status, w.StartTime, w.CloseTime
	sp.State.Generations = []selfplay.Generation{}
	if st, err := s.selfplayState(ctx, id, w.RunID); err == nil {
		sp.State = st
	} else if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return sp, temporalErr(what, err)
	}
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		var final selfplay.State
		if err := s.d.Temporal.GetWorkflow(ctx, id, "").Get(ctx, &final); err != nil {
			sp.Error = err.Error()
		} else {
			sp.State = final
		}
	}
	sp.Live = selfplay.LiveOf(desc.GetPendingActivities()).Play
	var in selfplay.Input
	if err := s.workflowInput(ctx, id, &in); err == nil {
		sp.LoopID, sp.GamePlugin, sp.Settings = in.LoopID, in.GamePlugin, in.Settings.WithDefaults()
	}
	fillSummary(&sp.SelfplaySummary, sp.State)
	if sp.State.Elo != nil {
		sp.Velocity, sp.VelocityNote = selfplay.Velocity(sp.State.Elo, config, time.Now())
	}
	return sp, nil
}

// leaderboards merges the Elo tables of every loop of a config (or of
// every config): each loop's models and heuristic baseline, the random
// anchor once.
func (s *Server) leaderboards(ctx context.Context, config string, history bool) ([]Leaderboard, error) {
	loops, err := s.listSelfplay(ctx, 1000)
	if err != nil {
		return nil, err
	}
	byConfig := map[string]*Leaderboard{}
	var order []string
	for _, l := range loops { // newest first
		if config != "" && l.Config != config {
			continue
		}
		st, err := s.selfplayState(ctx, selfplay.WorkflowID(l.Cluster, l.Config), "")
		if err != nil || st.Elo == nil {
			continue
		}
		b := byConfig[l.Config]
		if b == nil {
			b = &Leaderboard{Config: l.Config, Entries: []LeaderboardEntry{}}
			b.Velocity, b.VelocityNote = selfplay.Velocity(st.Elo, l.Config, time.Now())
			byConfig[l.Config] = b
			order = append(order, l.Config)
		}
		for _, r := range st.Elo.Leaderboard(l.Config) {
			if r.Model == elo.Random {
				if !hasModel(b.Entries, elo.Random) {
					b.Entries = append(b.Entries, LeaderboardEntry{Rating: r})
				}
				continue
			}
			b.Entries = append(b.Entries, LeaderboardEntry{Rating: r, Loop: l.ID})
		}
		if history {
			b.Matches = append(b.Matches, st.Elo.History(l.Config)...)
		}
	}
	if config != "" && len(order) == 0 {
		return nil, huma.Error404NotFound("no self-play loop has rated config " + config)
	}
	out := []Leaderboard{}
	sort.Strings(order)
	for _, c := range order {
		b := byConfig[c]
		sort.SliceStable(b.Entries, func(i, j int) bool { return b.Entries[i].Elo > b.Entries[j].Elo })
		sort.SliceStable(b.Matches, func(i, j int) bool { return b.Matches[i].At.Before(b.Matches[j].At) })
		out = append(out, *b)
	}
	return out, nil
}

func hasModel(es []LeaderboardEntry, model string) bool {
	for _, e := range es {
		if e.Model == model {
			return true
		}
	}
	return false
}

// ScheduleConfig is one config a scheduler may give slices to.
type ScheduleConfig struct {
	Config    string  `json:"config" minLength:"1" example:"hex8_2p"`
	Game      string  `json:"game,omitempty" doc:"Game plugin; default kinrow-<config>."`
	Weight    float64 `json:"weight,omitempty" minimum:"0" doc:"Curriculum weight (default 1)."`
	Quota     float64 `json:"quota,omitempty" minimum:"0" maximum:"1" doc:"Share of all slices (0: no quota)."`
	TargetElo float64 `json:"target_elo,omitempty" minimum:"0" doc:"The config is done once its best model reaches this rating."`
}

// SelfplayScheduleStart starts a cluster's self-play scheduler.
type SelfplayScheduleStart struct {
	Cluster          string            `json:"cluster" minLength:"1"`
	Configs          []ScheduleConfig  `json:"configs" minItems:"1"`
	Settings         selfplay.Settings `json:"settings,omitempty" doc:"Every loop's settings (generations is per slice: slice_generations)."`
	Slots            int               `json:"slots,omitempty" minimum:"0" doc:"Loops at once (default 1)."`
	SliceGenerations int               `json:"slice_generations,omitempty" minimum:"0" doc:"Generations per slice (default 2)."`
	MaxSlices        int               `json:"max_slices,omitempty" minimum:"0" doc:"Stop after this many slices (0: until every target is met or stopped)."`
	Options          schedule.Tuning   `json:"options,omitempty"`
}

// SelfplaySchedule is a scheduler's state.
type SelfplaySchedule struct {
	Cluster string                  `json:"cluster"`
	Status  string                  `json:"status"`
	State   selfplay.SchedulerState `json:"state"`
	Error   string                  `json:"error,omitempty"`
}

type scheduleClusterInput struct {
	Cluster string `path:"cluster"`
}

func (s *Server) registerSelfplaySchedules() {
	registerDaemon(s, daemon[SelfplaySchedule]{
		path: "/v1/selfplay-schedules", opID: "selfplay-schedule", what: "self-play scheduler", id: selfplay.SchedulerID, view: s.getSchedule,
		start: "Start a cluster's self-play scheduler: slices of generations go to the config with the highest priority (curriculum weight × Elo velocity, starvation boost after 4 h, quality gating, quotas) until every Elo target is met",
		get:   "A scheduler's configs with their priority and why, the slices run and each config's velocity, quality and best rating",
		stop:  "Stop a scheduler: its running loops stop after their generation in flight",
	}, s.startSchedule)
}

// startSchedule validates a scheduler and starts it.
func (s *Server) startSchedule(ctx context.Context, b SelfplayScheduleStart) (string, error) {
	set := b.Settings
	set.Generations = 0
	if err := settingsErr(set.WithDefaults()); err != nil {
		return b.Cluster, err
	}
	cfgs, ids, err := s.gameConfigs(ctx, b.Configs, "invalid schedule")
	if err != nil {
		return b.Cluster, err
	}
	id := selfplay.SchedulerID(b.Cluster)
	return b.Cluster, s.submit(ctx, submission{
		cluster: b.Cluster,
		units:   []unit{{id: id, what: "self-play scheduler", loc: "body", work: selfplay.SelfPlayWork(id, "", set)}},
		start: func(ctx context.Context) error {
			_, err := selfplay.StartScheduler(ctx, s.d.Temporal, selfplay.SchedulerInput{Cluster: b.Cluster, Configs: cfgs, Settings: set, Slots: b.Slots,
				SliceGenerations: b.SliceGenerations, MaxSlices: b.MaxSlices, Options: b.Options}, ids)
			return err
		},
	})
}

func (s *Server) getSchedule(ctx context.Context, clusterName string) (SelfplaySchedule, error) {
	sc := SelfplaySchedule{Cluster: clusterName}
	id := selfplay.SchedulerID(clusterName)
	var err error
	sc.Status, sc.Error, err = s.daemonState(ctx, id, "self-play scheduler of "+clusterName, &sc.State)
	if err != nil {
		return sc, err
	}
	return sc, nil
}

// SelfplayIdleStart starts a cluster's idle-resource daemon.
type SelfplayIdleStart struct {
	Cluster   string            `json:"cluster" minLength:"1"`
	Configs   []ScheduleConfig  `json:"configs" minItems:"1" doc:"Configs it may start on idle GPUs (weight, quota and target_elo are unused)."`
	Settings  selfplay.Settings `json:"settings,omitempty" doc:"The started loops' settings (gpus is 1)."`
	Threshold time.Duration     `json:"threshold,omitempty" minimum:"0" doc:"How long a GPU must be idle, in ns (default 10m)."`
	Poll      time.Duration     `json:"poll,omitempty" minimum:"0" doc:"How often the cluster is looked at, in ns (default 1m)."`
}

// SelfplayIdle is an idle daemon's state.
type SelfplayIdle struct {
	Cluster string             `json:"cluster"`
	Status  string             `json:"status"`
	State   selfplay.IdleState `json:"state"`
	Error   string             `json:"error,omitempty"`
}

func (s *Server) registerSelfplayIdle() {
	registerDaemon(s, daemon[SelfplayIdle]{
		path: "/v1/selfplay-idle", opID: "selfplay-idle", what: "idle-resource daemon", id: selfplay.IdleID, view: s.getIdle,
		start: "Start a cluster's idle-resource daemon: a GPU idle for the threshold (default 10 min) gets a self-play loop for the biggest board its VRAM suits",
		get:   "An idle daemon's view of the cluster's GPUs, since when each is idle, the loops it started and its decisions",
		stop:  "Stop an idle daemon; the loops it started go on (stop them with /v1/selfplay/{cluster}/{config}/stop)",
	}, s.startIdle)
}

func (s *Server) startIdle(ctx context.Context, b SelfplayIdleStart) (string, error) {
	set := b.Settings
	set.Generations, set.GPUs = max(0, set.Generations), 1
	if err := settingsErr(set.WithDefaults()); err != nil {
		return b.Cluster, err
	}
	cfgs, ids, err := s.gameConfigs(ctx, b.Configs, "invalid idle daemon")
	if err != nil {
		return b.Cluster, err
	}
	// No unit: the daemon places nothing itself; the cluster admits its
	// loops' work when it places it.
	return b.Cluster, s.submit(ctx, submission{cluster: b.Cluster, start: func(ctx context.Context) error {
		_, err := selfplay.StartIdle(ctx, s.d.Temporal, selfplay.IdleInput{Cluster: b.Cluster, Configs: cfgs, Settings: set, Threshold: b.Threshold, Poll: b.Poll}, ids)
		return err
	}})
}

func (s *Server) getIdle(ctx context.Context, clusterName string) (SelfplayIdle, error) {
	d := SelfplayIdle{Cluster: clusterName}
	id := selfplay.IdleID(clusterName)
	var err error
	d.Status, d.Error, err = s.daemonState(ctx, id, "idle-resource daemon of "+clusterName, &d.State)
	if err != nil {
		return d, err
	}
	return d, nil
}

// daemonState reads a daemon workflow (scheduler, idle daemon, populator)
// into state: the query while it runs, its result once it ended (errText
// then says why it failed, if it did).
func (s *Server) daemonState(ctx context.Context, id, what string, state any) (status, errText string, err error) {
	desc, err := s.d.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return "", "", temporalErr(what, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	running := info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	v, err := s.d.Temporal.QueryWorkflow(ctx, id, info.GetExecution().GetRunId(), selfplay.QueryState)
	if err == nil {
		_ = v.Get(state)
	} else if running {
		return "", "", temporalErr(what, err)
	}
	if !running {
		if err := s.d.Temporal.GetWorkflow(ctx, id, "").Get(ctx, state); err != nil {
			errText = err.Error()
		}
	}
	return statusName(info.GetStatus()), errText, nil
}
