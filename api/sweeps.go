package api

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/internal/workspec"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/sweep"
)

// SweepSummary is one sweep in a listing.
type SweepSummary struct {
	ID        string     `json:"id" example:"sweep-3f2a..."`
	Name      string     `json:"name,omitempty"`
	Cluster   string     `json:"cluster,omitempty"`
	Env       string     `json:"env,omitempty"`
	Status    string     `json:"status" enum:"running,completed,failed,canceled,terminated,continued_as_new,timed_out,unknown"`
	StartTime time.Time  `json:"start_time"`
	CloseTime *time.Time `json:"close_time,omitempty"`
}

// Sweep is one sweep with its results table.
type Sweep struct {
	SweepSummary
	Spec     sweep.SweepSpec `json:"spec"`
	Progress sweep.Results   `json:"progress"`
	Error    string          `json:"error,omitempty" doc:"Why the sweep failed, once failed."`
}

type submitSweepInput struct {
	Body sweep.SweepSpec
}

type sweepRefOutput struct {
	Body struct {
		ID     string   `json:"id"`
		Trials []string `json:"trials" doc:"Run ids of the trials, in trial order (GET /v1/runs/{id} once started)."`
	}
}

type sweepIDInput struct {
	ID string `path:"id" maxLength:"255"`
}

type sweepOutput struct{ Body Sweep }

type listSweepsOutput struct {
	Body struct {
		Sweeps []SweepSummary `json:"sweeps"`
	}
}

func (s *Server) registerSweeps() {
	submit := op(http.MethodPost, "/v1/sweeps", "submit-sweep",
		"Start a hyper-parameter sweep: a grid or a random search of training runs (child workflows), at most max_concurrent at once, weak trials stopped early by ASHA or the median rule, fractional GPUs shared", auth.Operator, "sweeps")
	submit.DefaultStatus = http.StatusCreated
	huma.Register(s.API, submit, s.submitSweep)

	huma.Register(s.API, op(http.MethodGet, "/v1/sweeps", "list-sweeps", "List sweeps, newest first", auth.Viewer, "sweeps"),
		func(ctx context.Context, in *listRunsInput) (*listSweepsOutput, error) {
			ws, err := s.listByType(ctx, sweep.Name, in.Limit)
			if err != nil {
				return nil, err
			}
			out := &listSweepsOutput{}
			out.Body.Sweeps = []SweepSummary{}
			for _, w := range ws {
				out.Body.Sweeps = append(out.Body.Sweeps, SweepSummary{ID: w.WorkflowID, Status: w.Status, StartTime: w.StartTime, CloseTime: w.CloseTime,
					Name: w.memo["name"], Cluster: w.memo["cluster"], Env: w.memo["env"]})
			}
			return out, nil
		})

	huma.Register(s.API, op(http.MethodGet, "/v1/sweeps/{id}", "get-sweep",
		"A sweep's results table: one row per trial (params, state, node, GPUs, final mean return, where a stopped trial stopped, checkpoint), the best trial and the ranking", auth.Viewer, "sweeps"),
		func(ctx context.Context, in *sweepIDInput) (*sweepOutput, error) {
			sw, err := s.getSweep(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return &sweepOutput{Body: sw}, nil
		})

	cancel := op(http.MethodPost, "/v1/sweeps/{id}/cancel", "cancel-sweep",
		"Cancel a sweep: running trials are cancelled (their checkpoints stay), pending ones never start", auth.Operator, "sweeps")
	cancel.DefaultStatus = http.StatusAccepted
	huma.Register(s.API, cancel, func(ctx context.Context, in *sweepIDInput) (*sweepOutput, error) {
		if !strings.HasPrefix(in.ID, sweep.IDPrefix) {
			return nil, huma.Error404NotFound("sweep " + in.ID + ": not found")
		}
		if err := s.d.Temporal.CancelWorkflow(ctx, in.ID, ""); err != nil {
			return nil, temporalErr("sweep "+in.ID, err)
		}
		sw, err := s.getSweep(ctx, in.ID)
		if err != nil {
			return nil, err
		}
		return &sweepOutput{Body: sw}, nil
	})
}

// submitSweep validates a sweep, resolves its plugins and submits it with
// one unit per trial.
func (s *Server) submitSweep(ctx context.Context, in *submitSweepInput) (*sweepRefOutput, error) {
	spec := in.Body
	spec.Run = spec.Run.WithDefaults()
	var env pluginstore.Record
	var ids []string
	if spec.Run.Env != "" {
		var err error
		if env, err = s.runPlugin(ctx, "body.run.env", spec.Run.Env, pluginhost.KindEnv); err != nil {
			return nil, err
		}
		ids = append(ids, env.ID)
	}
	var reward string
	if spec.Run.Reward != "" {
		rec, err := s.runPlugin(ctx, "body.run.reward", spec.Run.Reward, pluginhost.KindReward)
		if err != nil {
			return nil, err
		}
		reward = rec.ID
		ids = append(ids, rec.ID)
	}
	spec = spec.Normalized(env.Metadata.Name)
	if spec.Search == sweep.SearchRandom && spec.SearchSeed == 0 {
		spec.SearchSeed = rand.Uint64N(1<<53) | 1 // recorded in the spec: the workflow draws the same trials; exact in JSON numbers
	}
	if err := sweep.ValidateTrials(spec, env.Metadata.Name); err != nil {
		return nil, fieldErrors("invalid sweep", err)
	}
	if spec.Run.Shape().Learns() {
		if err := s.pinImports(ctx, &spec.Run, env.Metadata.Spec(), "run."); err != nil {
			return nil, err
		}
	}
	id := sweep.IDPrefix + uuid.NewString()
	params := sweep.Trials(spec)
	out := &sweepRefOutput{}
	out.Body.ID = id
	// Every trial is a unit: admitted, and placeable on an empty
	// cluster, before the sweep starts (a denial names the trial).
	sub := submission{
		cluster: spec.Run.Cluster,
		live: func(st cluster.Status) error {
			if spec.GPUsPerTrial > 0 && spec.GPUsPerTrial < 1 && st.Totals.GPUs == 0 {
				return huma.Error422UnprocessableEntity("sweep can never be placed on cluster "+spec.Run.Cluster,
					&huma.ErrorDetail{Location: "body.gpus_per_trial", Message: "no node of the cluster has a GPU to share", Value: spec.GPUsPerTrial})
			}
			return nil
		},
		start: func(ctx context.Context) error {
			if _, err := sweep.Start(ctx, s.d.Temporal, sweep.Input{
				SweepID: id, Spec: spec, EnvPlugin: env.ID, RewardPlugin: reward, Plugins: ids,
			}); err != nil {
				return temporalErr("start sweep", err)
			}
			return nil
		},
	}
	for i, p := range params {
		trialID := sweep.TrialID(id, i+1, len(params))
		ts, err := spec.TrialSpec(p)
		if err != nil {
			return nil, fieldErrors("invalid sweep", err)
		}
		sub.units = append(sub.units, unit{id: trialID, what: "trial " + p.String(), loc: "body.run", work: ts.TrainerWork(trialID, workspec.KindSweepTrial)})
		out.Body.Trials = append(out.Body.Trials, trialID)
	}
	if err := s.submit(ctx, sub); err != nil {
		return nil, err
	}
	return out, nil
}

// getSweep reads the results table: live from the query while the sweep
// runs, from its result (or last query state) once closed.
func (s *Server) getSweep(ctx context.Context, id string) (Sweep, error) {
	var sw Sweep
	if !strings.HasPrefix(id, sweep.IDPrefix) {
		return sw, huma.Error404NotFound("sweep " + id + ": not found")
	}
	desc, err := s.d.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return sw, temporalErr("sweep "+id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	w := summary(id, info.GetExecution().GetRunId(), info.GetType().GetName(), info.GetStatus(), "", info.GetStartTime().AsTime(), info.GetCloseTime())
	sw.ID, sw.Status, sw.StartTime, sw.CloseTime = id, w.Status, w.StartTime, w.CloseTime
	query := func() {
		if v, err := s.d.Temporal.QueryWorkflow(ctx, id, "", sweep.QueryProgress); err == nil {
			_ = v.Get(&sw.Progress)
		}
	}
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		query()
	} else if err := s.d.Temporal.GetWorkflow(ctx, id, "").Get(ctx, &sw.Progress); err != nil {
		sw.Error = err.Error()
		query()
	}
	if sw.Progress.Trials == nil {
		sw.Progress.Trials = []sweep.Trial{}
	}
	var in sweep.Input
	if err := s.workflowInput(ctx, id, &in); err == nil {
		sw.Spec, sw.Name, sw.Cluster, sw.Env = in.Spec, in.Spec.Name, in.Spec.Run.Cluster, in.Spec.Run.Env
	}
	return sw, nil
}
