package api

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/minio/minio-go/v7"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/selfplay/alerts"
	"github.com/trainyard/trainyard/internal/selfplay/populate"
	"github.com/trainyard/trainyard/workflows/cluster"
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
			loops, err := s.opsLoops(ctx)
			if err != nil {
				return nil, err
			}
			return &queueStatusOutput{Body: selfplay.QueueMix(loops, func(cluster string) (string, populate.Mix, bool) {
				p, err := s.getPopulator(ctx, cluster)
				return p.Status, p.Tuning.Mix, err == nil
			})}, nil
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
			st, err := s.clusterStatus(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			return &utilizationOutput{Body: st.Utilization()}, nil
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
	// No unit: the cluster admits the populator's loops' work when it
	// places it.
	return b.Cluster, s.submit(ctx, submission{cluster: b.Cluster, start: func(ctx context.Context) error {
		_, err := selfplay.StartPopulator(ctx, s.d.Temporal, selfplay.PopulatorInput{Cluster: b.Cluster, Configs: cfgs, Settings: set, Tuning: b.Tuning, Alerts: b.Alerts, Poll: b.Poll}, ids)
		return err
	}})
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

type configsOutput struct {
	Body struct {
		Configs []selfplay.ConfigEntry `json:"configs"`
	}
}

// opsLoops lists the loops (newest first) with their states.
func (s *Server) opsLoops(ctx context.Context) ([]selfplay.OpsLoop, error) {
	loops, err := s.listSelfplay(ctx, 1000)
	if err != nil {
		return nil, err
	}
	out := make([]selfplay.OpsLoop, 0, len(loops))
	for _, l := range loops {
		st, err := s.selfplayState(ctx, selfplay.WorkflowID(l.Cluster, l.Config), "")
		if err != nil {
			continue
		}
		out = append(out, selfplay.OpsLoop{ID: l.ID, Cluster: l.Cluster, Config: l.Config, Running: l.Status == "running", State: st})
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

func (s *Server) configsCatalogue(ctx context.Context) ([]selfplay.ConfigEntry, error) {
	loops, err := s.opsLoops(ctx)
	if err != nil {
		return nil, err
	}
	return selfplay.Catalogue(loops, s.weights(ctx), time.Now()), nil
}

type datasetsInput struct {
	Cluster string `query:"cluster" doc:"Only this cluster's loops."`
	Config  string `query:"config" doc:"Only this config's loops."`
}

type datasetsOutput struct {
	Body struct {
		Loops []selfplay.LoopData `json:"loops"`
	}
}

func (s *Server) datasets(ctx context.Context, clusterName, config string) ([]selfplay.LoopData, error) {
	loops, err := s.opsLoops(ctx)
	if err != nil {
		return nil, err
	}
	out := []selfplay.LoopData{}
	for _, l := range loops {
		if (clusterName != "" && l.Cluster != clusterName) || (config != "" && l.Config != config) {
			continue
		}
		var in selfplay.Input
		if err := s.workflowInput(ctx, selfplay.WorkflowID(l.Cluster, l.Config), &in); err != nil || in.LoopID == "" {
			continue
		}
		prefix := selfplay.Prefix(in.LoopID)
		var objects []selfplay.Object
		for o := range s.d.Store.Client.ListObjects(ctx, s.d.Store.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if o.Err != nil {
				return nil, huma.Error502BadGateway("list S3 objects of "+prefix, o.Err)
			}
			objects = append(objects, selfplay.Object{Key: o.Key, Size: o.Size})
		}
		out = append(out, selfplay.Datasets(l, in.LoopID, objects))
	}
	return out, nil
}

type queueStatusOutput struct{ Body selfplay.QueueStatus }

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

func (d Daemon) with(h selfplay.Health) Daemon {
	d.LastActivity, d.LastError, d.Detail = h.LastActivity, h.LastError, h.Detail
	return d
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
		out = append(out, d.with(st.Health()))
	}
	if runs, err = s.latestRuns(ctx, selfplay.IdleName); err != nil {
		return nil, err
	}
	for _, w := range runs {
		d := base("idle", w)
		var st selfplay.IdleState
		query(w, &st)
		out = append(out, d.with(st.Health()))
	}
	if runs, err = s.latestRuns(ctx, selfplay.PopulatorName); err != nil {
		return nil, err
	}
	for _, w := range runs {
		d := base("populator", w)
		var st selfplay.PopulatorState
		query(w, &st)
		out = append(out, d.with(st.Health()))
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
		if b := selfplay.LiveOf(desc.GetPendingActivities()).Batch; b != nil {
			d.Status, d.Running = "syncing", true
			d = d.with(b.Health())
		}
		out = append(out, d)
	}
	return out, nil
}

type utilizationOutput struct{ Body cluster.Utilization }

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
