package api

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/minio/minio-go/v7"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/selfplay/alerts"
	"github.com/trainyard/trainyard/internal/selfplay/catalog"
	"github.com/trainyard/trainyard/internal/selfplay/populate"
	"github.com/trainyard/trainyard/workflows/selfplay"
)

// SelfplayPopulatorStart starts a cluster's queue populator.
type SelfplayPopulatorStart struct {
	Cluster  string                   `json:"cluster" minLength:"1"`
	Configs  []ScheduleConfig         `json:"configs" minItems:"1" doc:"Configs it populates (weight and target_elo are used)."`
	Settings selfplay.Settings        `json:"settings,omitempty" doc:"Every loop's settings (generations is unused: the populator decides)."`
	Tuning   populate.PopulatorTuning `json:"tuning,omitempty"`
	Alerts   alerts.Thresholds        `json:"alerts,omitempty" doc:"The alert table's thresholds (default: the seed's)."`
	Poll     time.Duration            `json:"poll,omitempty" minimum:"0" doc:"How often it looks at the loops, in ns (default 30s)."`
}

// SelfplayPopulator is a populator's state.
type SelfplayPopulator struct {
	Cluster string                   `json:"cluster"`
	Status  string                   `json:"status"`
	Tuning  populate.PopulatorTuning `json:"tuning"`
	State   selfplay.PopulatorState  `json:"state"`
	Error   string                   `json:"error,omitempty"`
}

func (s *Server) registerSelfplayOps() {
	s.registerPopulator()
	huma.Register(s.API, op(http.MethodGet, "/v1/selfplay/configs", "selfplay-configs",
		"The game configs catalogue: every board family × player count with board cells, minimum VRAM and tier, curriculum weight, games so far, current Elo and Elo velocity", auth.Viewer, "selfplay"),
		func(ctx context.Context, _ *struct{}) (*configsOutput, error) {
			cs, err := s.configsCatalogue(ctx)
			if err != nil {
				return nil, err
			}
			out := &configsOutput{}
			out.Body.Configs = cs
			return out, nil
		})
	huma.Register(s.API, op(http.MethodGet, "/v1/selfplay/datasets", "selfplay-datasets",
		"Datasets and games in S3 per loop: each generation's game batches (count, bytes, games) and NPZ export (bytes, positions, quality score)", auth.Viewer, "selfplay"),
		func(ctx context.Context, in *datasetsInput) (*datasetsOutput, error) {
			ds, err := s.datasets(ctx, in.Cluster, in.Config)
			if err != nil {
				return nil, err
			}
			out := &datasetsOutput{}
			out.Body.Loops = ds
			return out, nil
		})
	huma.Register(s.API, op(http.MethodGet, "/v1/queue/status", "queue-status",
		"Self-play work queued and running by kind (selfplay, training, tournament) and config across clusters, with the actual against the target mix", auth.Viewer, "selfplay"),
		func(ctx context.Context, _ *struct{}) (*queueStatusOutput, error) {
			q, err := s.queueStatus(ctx)
			if err != nil {
				return nil, err
			}
			return &queueStatusOutput{Body: q}, nil
		})
	huma.Register(s.API, op(http.MethodGet, "/v1/daemons/health", "daemons-health",
		"Each self-play daemon (schedulers, idle-resource daemons, queue populators, the loops' ephemeral sync): running or not, last activity, last error", auth.Viewer, "selfplay"),
		func(ctx context.Context, _ *struct{}) (*daemonsOutput, error) {
			ds, err := s.daemonsHealth(ctx)
			if err != nil {
				return nil, err
			}
			out := &daemonsOutput{}
			out.Body.Daemons = ds
			return out, nil
		})
	huma.Register(s.API, op(http.MethodGet, "/v1/clusters/{name}/utilization", "cluster-utilization",
		"Per node CPU, memory and GPU allocation and, where the agent reports it, GPU utilisation", auth.Viewer, "clusters"),
		func(ctx context.Context, in *clusterNameInput) (*utilizationOutput, error) {
			u, err := s.utilization(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			return &utilizationOutput{Body: u}, nil
		})
	huma.Register(s.API, op(http.MethodGet, "/v1/alerts", "list-alerts",
		"The seed's alert table as each cluster's queue populator evaluates it: GPU utilisation < 50% for 30 min, < 20 self-play games/hour/node, queue depth > 20, Elo velocity < 1 Elo/day for 3 days; each with its condition, value and since when", auth.Viewer, "selfplay"),
		func(ctx context.Context, in *alertsInput) (*alertsOutput, error) {
			as, err := s.alerts(ctx, in.All)
			if err != nil {
				return nil, err
			}
			out := &alertsOutput{}
			out.Body.Alerts = as
			return out, nil
		})
}

func (s *Server) registerPopulator() {
	registerDaemon(s, daemon[SelfplayPopulator]{
		path: "/v1/selfplay-populators", opID: "selfplay-populator", what: "queue populator", id: selfplay.PopulatorID, view: s.getPopulator,
		start: "Start a cluster's queue populator: one populator-driven loop per config, whose queues it keeps at the target mix (60% self-play, 30% training, 10% tournament) until each config's Elo target is met, starved configs first",
		get:   "A populator's decisions: per config priority and why, target and actual mix, work done and queued by kind; the loops as last seen; recent decisions; alerts",
		stop:  "Stop a populator: its loops stop after the work item in flight",
	}, s.startPopulator)
}

func (s *Server) startPopulator(ctx context.Context, b SelfplayPopulatorStart) (string, error) {
	set := b.Settings
	set.Generations = 0
	if err := settingsErr(set.WithDefaults()); err != nil {
		return b.Cluster, err
	}
	if err := b.Tuning.WithDefaults().Validate(); err != nil {
		return b.Cluster, huma.Error422UnprocessableEntity("invalid populator tuning", &huma.ErrorDetail{Location: "body.tuning.mix", Message: err.Error()})
	}
	cfgs, ids, err := s.gameConfigs(ctx, b.Configs, "invalid populator")
	if err != nil {
		return b.Cluster, err
	}
	if _, err := s.clusterStatus(ctx, b.Cluster); err != nil {
		return b.Cluster, err
	}
	_, err = selfplay.StartPopulator(ctx, s.d.Temporal, selfplay.PopulatorInput{Cluster: b.Cluster, Configs: cfgs, Settings: set, Tuning: b.Tuning, Alerts: b.Alerts, Poll: b.Poll}, ids)
	return b.Cluster, err
}

func (s *Server) getPopulator(ctx context.Context, clusterName string) (SelfplayPopulator, error) {
	p := SelfplayPopulator{Cluster: clusterName}
	id := selfplay.PopulatorID(clusterName)
	var err error
	p.Status, p.Error, err = s.daemonState(ctx, id, "queue populator of "+clusterName, &p.State)
	if err != nil {
		return p, err
	}
	var in selfplay.PopulatorInput
	if err := s.workflowInput(ctx, id, &in); err == nil {
		p.Tuning = in.Tuning.WithDefaults()
	}
	return p, nil
}

// ConfigEntry is one config of the catalogue.
type ConfigEntry struct {
	catalog.Entry
	MinVRAMMB    int      `json:"min_vram_mb"`
	Weight       float64  `json:"weight" doc:"Curriculum weight given by a running populator or scheduler (1 when none names the config)."`
	Games        int      `json:"games" doc:"Self-play games played so far by its loops."`
	Best         string   `json:"best,omitempty"`
	Elo          float64  `json:"elo,omitempty" doc:"Rating of its best model (the highest among its loops)."`
	Velocity     float64  `json:"elo_velocity" doc:"Elo/day of that best model over the last 7 days (0 while too early: see elo_velocity_note)."`
	VelocityNote string   `json:"elo_velocity_note,omitempty" doc:"Why there is no velocity yet: the best model's history spans less than an hour."`
	Loops        []string `json:"loops,omitempty" doc:"Its loops (CLUSTER/CONFIG), newest first."`
}

type configsOutput struct {
	Body struct {
		Configs []ConfigEntry `json:"configs"`
	}
}

// loopState is a loop with its state.
type loopState struct {
	sum SelfplaySummary
	st  selfplay.State
}

// loopStates lists the loops (newest first) with their states.
func (s *Server) loopStates(ctx context.Context) ([]loopState, error) {
	loops, err := s.listSelfplay(ctx, 1000)
	if err != nil {
		return nil, err
	}
	out := make([]loopState, 0, len(loops))
	for _, l := range loops {
		st, err := s.selfplayState(ctx, selfplay.WorkflowID(l.Cluster, l.Config), "")
		if err != nil {
			continue
		}
		out = append(out, loopState{l, st})
	}
	return out, nil
}

// weights are the curriculum weights the running populators and
// schedulers give configs.
func (s *Server) weights(ctx context.Context) map[string]float64 {
	w := map[string]float64{}
	for _, typ := range []string{selfplay.PopulatorName, selfplay.SchedulerName} {
		resp, err := s.d.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.d.Namespace, PageSize: 100, Query: "ExecutionStatus = 'Running' AND WorkflowType = '" + typ + "'",
		})
		if err != nil {
			continue
		}
		for _, e := range resp.GetExecutions() {
			var in struct {
				Configs []selfplay.ScheduledConfig `json:"configs"`
			}
			if s.workflowInput(ctx, e.GetExecution().GetWorkflowId(), &in) != nil {
				continue
			}
			for _, c := range in.Configs {
				if c.Weight > 0 {
					w[c.Config] = c.Weight
				}
			}
		}
	}
	return w
}

func (s *Server) configsCatalogue(ctx context.Context) ([]ConfigEntry, error) {
	loops, err := s.loopStates(ctx)
	if err != nil {
		return nil, err
	}
	weights := s.weights(ctx)
	now := time.Now()
	out := []ConfigEntry{}
	for _, c := range catalog.Configs() {
		e := ConfigEntry{Entry: c, MinVRAMMB: c.MinGB * 1024, Weight: 1}
		if w, ok := weights[c.Config]; ok {
			e.Weight = w
		}
		for _, l := range loops {
			if l.sum.Config != c.Config {
				continue
			}
			e.Loops = append(e.Loops, l.sum.ID)
			e.Games += l.st.TotalGames
			if l.st.Best != "" && l.st.Elo != nil {
				if r := l.st.Elo.Get(l.sum.Config, l.st.Best).Elo; e.Best == "" || r > e.Elo {
					e.Best, e.Elo = l.st.Best, r
					e.Velocity, e.VelocityNote = velocity(l.st.Elo, l.sum.Config, now)
				}
			}
		}
		out = append(out, e)
	}
	return out, nil
}

type datasetsInput struct {
	Cluster string `query:"cluster" doc:"Only this cluster's loops."`
	Config  string `query:"config" doc:"Only this config's loops."`
}

// GenerationData is one generation's objects in S3.
type GenerationData struct {
	Generation   int     `json:"generation"`
	State        string  `json:"state,omitempty"`
	Games        int     `json:"games" doc:"Games synced (from the loop's state)."`
	Batches      int     `json:"batches" doc:"Game batch objects."`
	BatchBytes   int64   `json:"batch_bytes"`
	Dataset      string  `json:"dataset,omitempty" doc:"S3 key of the .npz export."`
	DatasetBytes int64   `json:"dataset_bytes,omitempty"`
	Positions    int     `json:"positions,omitempty"`
	Quality      float64 `json:"quality" doc:"The quality gate's score of the batch."`
	Passed       bool    `json:"passed"`
}

// LoopData is a loop's datasets and games.
type LoopData struct {
	ID          string           `json:"id" doc:"CLUSTER/CONFIG."`
	Config      string           `json:"config"`
	Prefix      string           `json:"prefix" doc:"S3 prefix of its objects."`
	Games       int              `json:"games"`
	Batches     int              `json:"batches"`
	BatchBytes  int64            `json:"batch_bytes"`
	Datasets    int              `json:"datasets"`
	DataBytes   int64            `json:"dataset_bytes"`
	Generations []GenerationData `json:"generations" doc:"Oldest first."`
}

type datasetsOutput struct {
	Body struct {
		Loops []LoopData `json:"loops"`
	}
}

func (s *Server) datasets(ctx context.Context, clusterName, config string) ([]LoopData, error) {
	loops, err := s.loopStates(ctx)
	if err != nil {
		return nil, err
	}
	out := []LoopData{}
	for _, l := range loops {
		if (clusterName != "" && l.sum.Cluster != clusterName) || (config != "" && l.sum.Config != config) {
			continue
		}
		var in selfplay.Input
		if err := s.workflowInput(ctx, selfplay.WorkflowID(l.sum.Cluster, l.sum.Config), &in); err != nil || in.LoopID == "" {
			continue
		}
		d := LoopData{ID: l.sum.ID, Config: l.sum.Config, Prefix: selfplay.Prefix(in.LoopID), Generations: []GenerationData{}}
		gens := map[int]*GenerationData{}
		get := func(n int) *GenerationData {
			if gens[n] == nil {
				gens[n] = &GenerationData{Generation: n}
			}
			return gens[n]
		}
		for o := range s.d.Store.Client.ListObjects(ctx, s.d.Store.Bucket, minio.ListObjectsOptions{Prefix: d.Prefix, Recursive: true}) {
			if o.Err != nil {
				return nil, huma.Error502BadGateway("list S3 objects of "+d.Prefix, o.Err)
			}
			rest := strings.TrimPrefix(o.Key, d.Prefix)
			var n int
			if _, err := fmt.Sscanf(rest, "gen-%06d/", &n); err != nil {
				continue // models
			}
			g := get(n)
			switch {
			case strings.Contains(rest, "/games/"):
				g.Batches++
				g.BatchBytes += o.Size
			case strings.HasSuffix(rest, ".npz"):
				g.Dataset, g.DatasetBytes = o.Key, o.Size
			}
		}
		for _, gen := range l.st.Generations {
			g := get(gen.N)
			g.State, g.Games, g.Positions, g.Quality, g.Passed = gen.State, gen.Games, gen.Positions, gen.Quality.Score, gen.Quality.Passed
		}
		for _, g := range gens {
			d.Generations = append(d.Generations, *g)
			d.Games += g.Games
			d.Batches += g.Batches
			d.BatchBytes += g.BatchBytes
			if g.Dataset != "" {
				d.Datasets++
				d.DataBytes += g.DatasetBytes
			}
		}
		sort.Slice(d.Generations, func(i, j int) bool { return d.Generations[i].Generation < d.Generations[j].Generation })
		out = append(out, d)
	}
	return out, nil
}

// ConfigQueue is one config's self-play work on a cluster.
type ConfigQueue struct {
	Config    string          `json:"config"`
	Loop      string          `json:"loop" doc:"CLUSTER/CONFIG."`
	Populated bool            `json:"populated" doc:"Driven by the cluster's queue populator (else a plain loop running whole generations)."`
	Queued    populate.Counts `json:"queued" doc:"Work items waiting, by kind."`
	Running   string          `json:"running,omitempty" doc:"The kind running now."`
	Done      populate.Counts `json:"done" doc:"Work done by kind."`
	Actual    populate.Mix    `json:"actual" doc:"Share of each kind among the work done and queued."`
}

// ClusterQueue is a cluster's self-play work.
type ClusterQueue struct {
	Cluster   string          `json:"cluster"`
	Populator string          `json:"populator,omitempty" doc:"The populator's status, when the cluster has one."`
	Configs   []ConfigQueue   `json:"configs"`
	Queued    populate.Counts `json:"queued"`
	Running   populate.Counts `json:"running"`
	Done      populate.Counts `json:"done"`
	Depth     int             `json:"depth" doc:"Work items queued or running."`
	Target    populate.Mix    `json:"target"`
	Actual    populate.Mix    `json:"actual"`
}

// QueueStatus is every cluster's self-play work.
type QueueStatus struct {
	Clusters []ClusterQueue  `json:"clusters"`
	Queued   populate.Counts `json:"queued"`
	Running  populate.Counts `json:"running"`
	Target   populate.Mix    `json:"target" doc:"The seed's mix."`
	Actual   populate.Mix    `json:"actual" doc:"Over all clusters' work done and queued."`
}

type queueStatusOutput struct{ Body QueueStatus }

// phaseKind maps a plain loop's phase to the kind of work it does.
func phaseKind(phase string) string {
	switch phase {
	case "selfplay", "export":
		return populate.Selfplay
	case "train":
		return populate.Training
	case "gauntlet":
		return populate.Tournament
	}
	return ""
}

func (s *Server) queueStatus(ctx context.Context) (QueueStatus, error) {
	q := QueueStatus{Clusters: []ClusterQueue{}, Queued: populate.Counts{}, Running: populate.Counts{}, Target: populate.DefaultMix}
	loops, err := s.loopStates(ctx)
	if err != nil {
		return q, err
	}
	byCluster := map[string]*ClusterQueue{}
	all := populate.Counts{}
	for _, l := range loops {
		if l.sum.Status != "running" {
			continue
		}
		c := byCluster[l.sum.Cluster]
		if c == nil {
			c = &ClusterQueue{Cluster: l.sum.Cluster, Configs: []ConfigQueue{}, Queued: populate.Counts{}, Running: populate.Counts{}, Done: populate.Counts{}, Target: populate.DefaultMix}
			if p, err := s.getPopulator(ctx, l.sum.Cluster); err == nil {
				c.Populator, c.Target = p.Status, p.Tuning.Mix
			}
			byCluster[l.sum.Cluster] = c
		}
		cq := ConfigQueue{Config: l.sum.Config, Loop: l.sum.ID, Populated: l.st.Queued, Queued: populate.Counts{}, Done: populate.Counts{}}
		if l.st.Queued {
			for _, w := range l.st.Queue {
				cq.Queued[w.Kind]++
			}
			if l.st.Current != nil {
				cq.Running = l.st.Current.Kind
			}
			for k, n := range l.st.WorkDone {
				cq.Done[k] = n
			}
		} else {
			cq.Running = phaseKind(l.st.Phase)
			for _, g := range l.st.Generations {
				cq.Done[populate.Selfplay]++
				if g.Model != "" {
					cq.Done[populate.Training]++
				}
				if len(g.Gauntlet) > 0 {
					cq.Done[populate.Tournament]++
				}
			}
		}
		mixed := populate.Counts{}
		for _, k := range populate.Kinds {
			mixed[k] = cq.Done[k] + cq.Queued[k]
			c.Queued[k] += cq.Queued[k]
			c.Done[k] += cq.Done[k]
			q.Queued[k] += cq.Queued[k]
			all[k] += mixed[k]
		}
		if cq.Running != "" {
			mixed[cq.Running]++
			c.Running[cq.Running]++
			q.Running[cq.Running]++
			all[cq.Running]++
		}
		cq.Actual = mixed.Share()
		c.Configs = append(c.Configs, cq)
	}
	for _, name := range sortedNames(byCluster) {
		c := byCluster[name]
		tot := populate.Counts{}
		for _, k := range populate.Kinds {
			tot[k] = c.Done[k] + c.Queued[k] + c.Running[k]
		}
		c.Actual, c.Depth = tot.Share(), c.Queued.Total()+c.Running.Total()
		sort.Slice(c.Configs, func(i, j int) bool { return c.Configs[i].Config < c.Configs[j].Config })
		q.Clusters = append(q.Clusters, *c)
	}
	q.Actual = all.Share()
	return q, nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Daemon is one daemon's health.
type Daemon struct {
	Kind         string     `json:"kind" enum:"scheduler,idle,populator,ephemeral-sync"`
	ID           string     `json:"id" doc:"Workflow id (the loop's, for ephemeral sync)."`
	Cluster      string     `json:"cluster"`
	Status       string     `json:"status" doc:"The workflow's status; for ephemeral sync: syncing (a batch in flight) or idle."`
	Running      bool       `json:"running"`
	LastActivity *time.Time `json:"last_activity,omitempty" doc:"Its last decision, poll or (sync) heartbeat."`
	LastError    string     `json:"last_error,omitempty"`
	Detail       string     `json:"detail,omitempty"`
}

type daemonsOutput struct {
	Body struct {
		Daemons []Daemon `json:"daemons"`
	}
}

// latestRuns lists the newest run of each workflow of a type.
func (s *Server) latestRuns(ctx context.Context, typ string) ([]*workflowExecution, error) {
	resp, err := s.d.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: s.d.Namespace, PageSize: 1000, Query: "WorkflowType = '" + typ + "'",
	})
	if err != nil {
		return nil, temporalErr("list "+typ, err)
	}
	seen := map[string]bool{}
	var out []*workflowExecution
	for _, e := range resp.GetExecutions() {
		id := e.GetExecution().GetWorkflowId()
		if seen[id] || e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
			continue
		}
		seen[id] = true
		var cl string
		if p, ok := e.GetMemo().GetFields()["cluster"]; ok {
			_ = converter.GetDefaultDataConverter().FromPayload(p, &cl)
		}
		out = append(out, &workflowExecution{id: id, runID: e.GetExecution().GetRunId(), status: e.GetStatus(), cluster: cl})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out, nil
}

type workflowExecution struct {
	id, runID, cluster string
	status             enumspb.WorkflowExecutionStatus
}

func (s *Server) daemonsHealth(ctx context.Context) ([]Daemon, error) {
	out := []Daemon{}
	query := func(w *workflowExecution, v any) {
		if w.status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			if r, err := s.d.Temporal.QueryWorkflow(ctx, w.id, w.runID, selfplay.QueryState); err == nil {
				_ = r.Get(v)
			}
			return
		}
		_ = s.d.Temporal.GetWorkflow(ctx, w.id, w.runID).Get(ctx, v)
	}
	base := func(kind string, w *workflowExecution) Daemon {
		return Daemon{Kind: kind, ID: w.id, Cluster: w.cluster, Status: statusName(w.status), Running: w.status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
	}
	runs, err := s.latestRuns(ctx, selfplay.SchedulerName)
	if err != nil {
		return nil, err
	}
	for _, w := range runs {
		d := base("scheduler", w)
		var st selfplay.SchedulerState
		query(w, &st)
		if n := len(st.History); n > 0 {
			h := st.History[n-1]
			d.LastActivity = &h.Ended
			if strings.HasPrefix(h.Result, "failed") {
				d.LastError = h.Config + ": " + h.Result
			}
		}
		d.Detail = fmt.Sprintf("%s, %d slices", st.Phase, st.Slices)
		out = append(out, d)
	}
	if runs, err = s.latestRuns(ctx, selfplay.IdleName); err != nil {
		return nil, err
	}
	for _, w := range runs {
		d := base("idle", w)
		var st selfplay.IdleState
		query(w, &st)
		for _, e := range st.Events {
			d.LastActivity = &e.At
			if strings.HasPrefix(e.What, "cluster status:") || strings.HasPrefix(e.What, "loop ended:") {
				d.LastError = e.What
			}
		}
		d.Detail = fmt.Sprintf("%s, %d polls, %d GPUs watched, %d loops running", st.Phase, st.Polls, len(st.GPUs), len(st.Running))
		out = append(out, d)
	}
	if runs, err = s.latestRuns(ctx, selfplay.PopulatorName); err != nil {
		return nil, err
	}
	for _, w := range runs {
		d := base("populator", w)
		var st selfplay.PopulatorState
		query(w, &st)
		d.LastActivity, d.LastError = st.LastPoll, st.LastError
		d.Detail = fmt.Sprintf("%s, %d polls, %d configs, %d alerts", st.Phase, st.Polls, len(st.Plans), len(st.Alerts))
		out = append(out, d)
	}
	// Ephemeral sync: the self-play batch activity of each running loop
	// uploads finished games every sync_interval and heartbeats.
	loops, err := s.listSelfplay(ctx, 1000)
	if err != nil {
		return nil, err
	}
	for _, l := range loops {
		if l.Status != "running" {
			continue
		}
		id := selfplay.WorkflowID(l.Cluster, l.Config)
		d := Daemon{Kind: "ephemeral-sync", ID: id, Cluster: l.Cluster, Status: "idle", Running: false, Detail: "no self-play batch in flight (phase " + l.Phase + ")"}
		desc, err := s.d.Temporal.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			d.LastError = err.Error()
			out = append(out, d)
			continue
		}
		for _, pa := range desc.GetPendingActivities() {
			if !strings.HasSuffix(pa.GetActivityType().GetName(), "SelfplayBatch") {
				continue
			}
			d.Status, d.Running = "syncing", true
			if t := pa.GetLastHeartbeatTime(); t != nil {
				at := t.AsTime()
				d.LastActivity = &at
			}
			if f := pa.GetLastFailure(); f != nil {
				d.LastError = f.GetMessage()
			}
			var p selfplay.PlayProgress
			if pa.GetHeartbeatDetails() != nil && converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &p) == nil {
				d.Detail = fmt.Sprintf("%d of %d games synced in %d batches", p.Synced, p.Target, p.Batches)
			} else {
				d.Detail = "batch started, no heartbeat yet"
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// GPUAllocation is one GPU's allocation and utilisation.
type GPUAllocation struct {
	Index     int    `json:"index"`
	Model     string `json:"model,omitempty"`
	VRAMMB    int    `json:"vram_mb"`
	Allocated bool   `json:"allocated" doc:"A job holds it."`
	Util      *int   `json:"util,omitempty" doc:"Utilisation % as the agent reports it; absent where not measured."`
}

// NodeUtilization is one node's allocation.
type NodeUtilization struct {
	Name      string          `json:"name"`
	Health    string          `json:"health"`
	CPUs      float64         `json:"cpus"`
	CPUsUsed  float64         `json:"cpus_used"`
	CPUPct    float64         `json:"cpu_allocated_pct"`
	MemoryMB  int64           `json:"memory_mb"`
	MemUsedMB int64           `json:"memory_mb_used"`
	GPUs      []GPUAllocation `json:"gpus"`
	GPUPct    float64         `json:"gpu_allocated_pct"`
	GPUUtil   *float64        `json:"gpu_util_mean,omitempty" doc:"Mean reported GPU utilisation %; absent where not measured."`
	Jobs      []string        `json:"jobs,omitempty"`
}

// Utilization is a cluster's allocation.
type Utilization struct {
	Cluster string            `json:"cluster"`
	Nodes   []NodeUtilization `json:"nodes"`
	CPUPct  float64           `json:"cpu_allocated_pct"`
	GPUPct  float64           `json:"gpu_allocated_pct"`
	GPUUtil *float64          `json:"gpu_util_mean,omitempty"`
}

type utilizationOutput struct{ Body Utilization }

func pct(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * a / b
}

func (s *Server) utilization(ctx context.Context, name string) (Utilization, error) {
	st, err := s.clusterStatus(ctx, name)
	if err != nil {
		return Utilization{}, err
	}
	u := Utilization{Cluster: name, Nodes: []NodeUtilization{}}
	var utilSum, utilN float64
	for _, n := range st.Nodes {
		nu := NodeUtilization{Name: n.Name, Health: string(n.Health), CPUs: n.Resources.CPUs, CPUsUsed: n.Used.CPUs, MemoryMB: n.Resources.MemoryMB,
			MemUsedMB: n.Used.MemoryMB, GPUs: []GPUAllocation{}, Jobs: n.Jobs}
		nu.CPUPct = pct(nu.CPUsUsed, nu.CPUs)
		var alloc, sum, cnt float64
		for i, g := range n.Resources.GPUs {
			gu := GPUAllocation{Index: g.Index, Model: g.Model, VRAMMB: g.VRAMMB}
			for _, x := range n.Used.GPUs {
				gu.Allocated = gu.Allocated || x == g.Index
			}
			if gu.Allocated {
				alloc++
			}
			if i < len(n.GPUUtil) {
				v := n.GPUUtil[i]
				gu.Util = &v
				sum, cnt = sum+float64(v), cnt+1
			}
			nu.GPUs = append(nu.GPUs, gu)
		}
		nu.GPUPct = pct(alloc, float64(len(n.Resources.GPUs)))
		if cnt > 0 {
			m := sum / cnt
			nu.GPUUtil = &m
			utilSum, utilN = utilSum+sum, utilN+cnt
		}
		u.Nodes = append(u.Nodes, nu)
	}
	u.CPUPct = pct(st.Totals.CPUsUsed, st.Totals.CPUs)
	u.GPUPct = pct(float64(st.Totals.GPUsUsed), float64(st.Totals.GPUs))
	if utilN > 0 {
		m := utilSum / utilN
		u.GPUUtil = &m
	}
	return u, nil
}

type alertsInput struct {
	All bool `query:"all" doc:"Include pending conditions (holding, not yet for their duration)."`
}

// ClusterAlert is an alert of a cluster's populator.
type ClusterAlert struct {
	Cluster string `json:"cluster"`
	alerts.Alert
}

type alertsOutput struct {
	Body struct {
		Alerts []ClusterAlert `json:"alerts"`
	}
}

func (s *Server) alerts(ctx context.Context, all bool) ([]ClusterAlert, error) {
	runs, err := s.latestRuns(ctx, selfplay.PopulatorName)
	if err != nil {
		return nil, err
	}
	out := []ClusterAlert{}
	for _, w := range runs {
		if w.status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			continue
		}
		r, err := s.d.Temporal.QueryWorkflow(ctx, w.id, w.runID, selfplay.QueryState)
		if err != nil {
			continue
		}
		var st selfplay.PopulatorState
		if r.Get(&st) != nil {
			continue
		}
		for _, a := range st.Alerts {
			if all || a.State == "firing" {
				out = append(out, ClusterAlert{Cluster: w.cluster, Alert: a})
			}
		}
	}
	return out, nil
}
