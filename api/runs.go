package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/internal/scalars"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/internal/workspec"
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/train"
)

// RunSummary is one training run in a listing.
type RunSummary struct {
	ID        string     `json:"id" example:"run-3f2a..."`
	Name      string     `json:"name,omitempty"`
	Cluster   string     `json:"cluster,omitempty"`
	Env       string     `json:"env,omitempty" doc:"Env plugin as submitted."`
	Status    string     `json:"status" enum:"running,completed,failed,canceled,terminated,continued_as_new,timed_out,unknown"`
	StartTime time.Time  `json:"start_time"`
	CloseTime *time.Time `json:"close_time,omitempty"`
}

// Run is one training run in full.
type Run struct {
	RunSummary
	Spec     training.Spec     `json:"spec"`
	Progress train.RunProgress `json:"progress"`
	// Live is the latest iteration of the segment in flight, newer than
	// Progress.Metrics (which grow a segment at a time).
	Live *learner.Metrics `json:"live,omitempty"`
	// LiveOutput is a command trainer's recent output while it runs.
	LiveOutput string `json:"live_output,omitempty"`
	// Scalars: what a command trainer reported (TRAINYARD_SCALAR lines).
	Scalars map[string]scalars.ScalarPoint `json:"scalars,omitempty" doc:"Command and llm runs: each tag's newest value the trainer reported (TRAINYARD_SCALAR lines, a loop step's loss; the whole curves: GET /v1/runs/{id}/scalars)."`
	// Loop is a kind llm run's loop, live from its activities' heartbeats.
	Loop *train.LoopLive `json:"loop,omitempty" doc:"Kind llm, while it runs: the trainer's and each rollout worker's latest heartbeat (every ~2-16 s)."`
	// Waiting is what the work in flight waits on, from its heartbeats.
	Waiting string `json:"waiting,omitempty" doc:"While it runs: what its work in flight waits on, from the agents' heartbeats (S3 not answering a node for over 10 s, with the last error); empty when nothing."`
	Error   string `json:"error,omitempty" doc:"Why the run failed, once failed."`
}

// CheckpointInfo is one stored checkpoint.
type CheckpointInfo struct {
	Seq       int64              `json:"seq"`
	Created   time.Time          `json:"created"`
	Iteration int64              `json:"iteration"`
	Metrics   map[string]float64 `json:"metrics,omitempty"`
	Labels    map[string]string  `json:"labels,omitempty"`
	SizeBytes int64              `json:"size_bytes"`
	Files     []string           `json:"files"`
	Manifest  string             `json:"manifest_key" doc:"S3 key of the manifest (see docs/training.md for the layout)."`
}

type submitRunInput struct {
	Body training.Spec
}

type runRefOutput struct {
	Body struct {
		ID         string `json:"id"`
		WorkflowID string `json:"workflow_id"`
		EnvPlugin  string `json:"env_plugin" doc:"sha256 of the env plugin the run uses."`
	}
}

type runIDInput struct {
	ID string `path:"id" maxLength:"255"`
}

type runOutput struct{ Body Run }

type listRunsInput struct {
	Limit int `query:"limit" minimum:"1" maximum:"1000" default:"50"`
}

type listRunsOutput struct {
	Body struct {
		Runs []RunSummary `json:"runs"`
	}
}

type checkpointsOutput struct {
	Body struct {
		Checkpoints []CheckpointInfo `json:"checkpoints"`
	}
}

type checkpointFileInput struct {
	ID   string `path:"id" maxLength:"255"`
	Seq  int64  `path:"seq" minimum:"1"`
	File string `path:"file" maxLength:"255" example:"learner.ckpt"`
}

type checkpointFileOutput struct {
	ContentType string `header:"Content-Type"`
	Body        []byte
}

type runLogsOutput struct {
	Body struct {
		Lines []string `json:"lines" doc:"One line per iteration and per event (placement, restore, end)."`
	}
}

// AlgorithmInfo is one registered algorithm (internal/training/algorithm.go).
type AlgorithmInfo struct {
	Name  string `json:"name"`
	Doc   string `json:"doc"`
	Shape string `json:"shape" doc:"How the run workflow runs it: segments (the built-in learner), command (your trainer process) or loop (the LLM-RL loop)."`
	Kind  string `json:"kind,omitempty" doc:"The run kind that sets it; unset: a kind training run names it in algorithm."`
	// Hyperparameters are the learner config's names and fallback values.
	Hyperparameters map[string]any `json:"hyperparameters,omitempty" doc:"The built-in learner's hyper-parameters a run may set in hyperparameters, with their defaults for an env without tuned ones (CartPole-v1 and Pendulum-v1 have their own)."`
	Distributed     bool           `json:"distributed,omitempty" doc:"It takes rollout_workers (distributed rollouts)."`
}

// algorithmInfo describes a for GET /v1/algorithms.
func algorithmInfo(a training.Algorithm) AlgorithmInfo {
	info := AlgorithmInfo{Name: a.Name, Doc: a.Doc, Shape: string(a.Shape), Kind: a.Kind, Distributed: a.Distributes()}
	if a.Learner == nil {
		return info
	}
	cfg, err := a.Learner.Config("", learner.Knobs{Workers: 1})
	if err != nil {
		return info
	}
	b, _ := json.Marshal(cfg)
	_ = json.Unmarshal(b, &info.Hyperparameters)
	delete(info.Hyperparameters, "seed") // the run's own fields
	delete(info.Hyperparameters, "workers")
	return info
}

type listAlgorithmsOutput struct {
	Body struct {
		Algorithms []AlgorithmInfo `json:"algorithms"`
	}
}

// runPrefix marks training-run workflow ids.
const runPrefix = "run-"

func (s *Server) registerRuns() {
	submit := op(http.MethodPost, "/v1/runs", "submit-run",
		"Start a training run: admitted by policy, placed on a cluster node, checkpointed to S3", auth.Operator, "runs")
	submit.DefaultStatus = http.StatusCreated
	huma.Register(s.API, submit, s.submitRun)

	huma.Register(s.API, op(http.MethodGet, "/v1/algorithms", "list-algorithms", "The algorithms a run may name, from the registry", auth.Viewer, "runs"),
		func(context.Context, *struct{}) (*listAlgorithmsOutput, error) {
			out := &listAlgorithmsOutput{}
			for _, a := range training.Algorithms() {
				out.Body.Algorithms = append(out.Body.Algorithms, algorithmInfo(a))
			}
			return out, nil
		})

	huma.Register(s.API, op(http.MethodGet, "/v1/runs", "list-runs", "List training runs, newest first", auth.Viewer, "runs"),
		func(ctx context.Context, in *listRunsInput) (*listRunsOutput, error) {
			ws, err := s.listByType(ctx, train.Name, in.Limit)
			if err != nil {
				return nil, err
			}
			out := &listRunsOutput{}
			out.Body.Runs = []RunSummary{}
			for _, w := range ws {
				out.Body.Runs = append(out.Body.Runs, RunSummary{ID: w.WorkflowID, Status: w.Status, StartTime: w.StartTime, CloseTime: w.CloseTime,
					Name: w.memo["name"], Cluster: w.memo["cluster"], Env: w.memo["env"]})
			}
			return out, nil
		})

	huma.Register(s.API, op(http.MethodGet, "/v1/runs/{id}", "get-run",
		"A run's state, node, per-iteration metrics (return, steps/s, losses, KL, entropy), checkpoints and why it waits", auth.Viewer, "runs"),
		func(ctx context.Context, in *runIDInput) (*runOutput, error) {
			r, err := s.getRun(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return &runOutput{Body: r}, nil
		})

	huma.Register(s.API, op(http.MethodGet, "/v1/runs/{id}/logs", "get-run-logs",
		"A run's log: one line per iteration and per event", auth.Viewer, "runs"),
		func(ctx context.Context, in *runIDInput) (*runLogsOutput, error) {
			r, err := s.getRun(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			out := &runLogsOutput{}
			out.Body.Lines = RunLogLines(r)
			return out, nil
		})

	for _, c := range []struct{ verb, summary string }{
		{"pause", "Pause a run at its next checkpoint and give its node back"},
		{"resume", "Resume a paused run from its latest checkpoint"},
	} {
		o := op(http.MethodPost, "/v1/runs/{id}/"+c.verb, c.verb+"-run", c.summary, auth.Operator, "runs")
		o.DefaultStatus = http.StatusAccepted
		huma.Register(s.API, o, func(ctx context.Context, in *runIDInput) (*runOutput, error) {
			if !strings.HasPrefix(in.ID, runPrefix) {
				return nil, huma.Error404NotFound("run " + in.ID + ": not found")
			}
			r, err := s.getRun(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			if !r.Spec.Shape().Pausable() {
				// The platform cannot see a command's checkpoint boundaries.
				return nil, huma.Error409Conflict("run " + in.ID + ": " + c.verb + " applies to the built-in learner; stop a command trainer with cancel (its checkpoint dir is synced first)")
			}
			if err := s.d.Temporal.SignalWorkflow(ctx, in.ID, "", train.SignalControl, train.RunControl{Action: c.verb}); err != nil {
				return nil, temporalErr("run "+in.ID, err)
			}
			if r, err = s.getRun(ctx, in.ID); err != nil {
				return nil, err
			}
			return &runOutput{Body: r}, nil
		})
	}

	cancel := op(http.MethodPost, "/v1/runs/{id}/cancel", "cancel-run", "Cancel a run; its checkpoints stay", auth.Operator, "runs")
	cancel.DefaultStatus = http.StatusAccepted
	huma.Register(s.API, cancel, func(ctx context.Context, in *runIDInput) (*runOutput, error) {
		if !strings.HasPrefix(in.ID, runPrefix) {
			return nil, huma.Error404NotFound("run " + in.ID + ": not found")
		}
		if err := s.d.Temporal.CancelWorkflow(ctx, in.ID, ""); err != nil {
			return nil, temporalErr("run "+in.ID, err)
		}
		r, err := s.getRun(ctx, in.ID)
		if err != nil {
			return nil, err
		}
		return &runOutput{Body: r}, nil
	})

	huma.Register(s.API, op(http.MethodGet, "/v1/runs/{id}/checkpoints", "list-run-checkpoints",
		"A run's checkpoints (after retention), oldest first", auth.Viewer, "runs"),
		func(ctx context.Context, in *runIDInput) (*checkpointsOutput, error) {
			cs := s.checkpoints()
			ms, err := cs.List(ctx, in.ID)
			if err != nil {
				return nil, checkpointErr(in.ID, err)
			}
			out := &checkpointsOutput{}
			out.Body.Checkpoints = []CheckpointInfo{}
			for _, m := range ms {
				ci := CheckpointInfo{Seq: m.Seq, Created: m.Created, Iteration: m.Meta.Iteration, Metrics: m.Meta.Metrics,
					Labels: m.Meta.Labels, SizeBytes: m.Size(), Files: []string{}, Manifest: cs.ManifestKey(in.ID, m.Seq)}
				for _, f := range m.Files {
					ci.Files = append(ci.Files, f.Path)
				}
				out.Body.Checkpoints = append(out.Body.Checkpoints, ci)
			}
			return out, nil
		})

	huma.Register(s.API, op(http.MethodGet, "/v1/runs/{id}/checkpoints/{seq}/files/{file}", "download-checkpoint-file",
		"Download one file of a checkpoint, reassembled from its chunks and checksum-verified", auth.Viewer, "runs"),
		func(ctx context.Context, in *checkpointFileInput) (*checkpointFileOutput, error) {
			cs := s.checkpoints()
			m, err := cs.Get(ctx, in.ID, in.Seq)
			if err != nil {
				return nil, checkpointErr(fmt.Sprintf("%s checkpoint %d", in.ID, in.Seq), err)
			}
			sub := m
			sub.Files = nil
			for _, f := range m.Files {
				if f.Path == in.File {
					sub.Files = append(sub.Files, f)
				}
			}
			if len(sub.Files) == 0 {
				return nil, huma.Error404NotFound(fmt.Sprintf("checkpoint %d of %s has no file %q", in.Seq, in.ID, in.File))
			}
			dir, err := os.MkdirTemp("", "trainyard-download-")
			if err != nil {
				return nil, huma.Error500InternalServerError("temp dir", err)
			}
			defer os.RemoveAll(dir)
			if err := cs.RestoreManifest(ctx, sub, dir); err != nil {
				return nil, checkpointErr(fmt.Sprintf("%s checkpoint %d", in.ID, in.Seq), err)
			}
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path.Clean(in.File))))
			if err != nil {
				return nil, huma.Error500InternalServerError("read restored file", err)
			}
			return &checkpointFileOutput{ContentType: "application/octet-stream", Body: b}, nil
		})
}

// submitRun validates a run, resolves its plugins and submits it.
func (s *Server) submitRun(ctx context.Context, in *submitRunInput) (*runRefOutput, error) {
	spec := in.Body.WithDefaults()
	if err := spec.Validate(); err != nil {
		return nil, fieldErrors("invalid run spec", err)
	}
	var env pluginstore.Record
	var ids []string
	if spec.Env != "" {
		var err error
		if env, err = s.runPlugin(ctx, "body.env", spec.Env, pluginhost.KindEnv); err != nil {
			return nil, err
		}
		ids = append(ids, env.ID)
	}
	if spec.Shape().Learns() {
		if _, err := spec.LearnerConfig(env.Metadata.Name); err != nil {
			return nil, fieldErrors("invalid run spec", err)
		}
		if err := spec.CheckEnv(env.Metadata.Spec()); err != nil {
			return nil, fieldErrors("invalid run spec", err)
		}
		if err := s.pinImports(ctx, &spec, env.Metadata.Spec(), ""); err != nil {
			return nil, err
		}
	}
	var reward string
	if spec.Reward != "" {
		rec, err := s.runPlugin(ctx, "body.reward", spec.Reward, pluginhost.KindReward)
		if err != nil {
			return nil, err
		}
		reward = rec.ID
		ids = append(ids, rec.ID)
	}
	id := runPrefix + uuid.NewString()
	out := &runRefOutput{}
	var endpoints []inference.Endpoint
	err := s.submit(ctx, submission{
		cluster: spec.Cluster,
		units:   []unit{{id: id, what: "run", loc: "body", work: spec.WorkSpec(id), extra: []func(*policy.Input){runCapabilities(spec, env.Metadata)}}},
		live: func(st cluster.Status) (err error) {
			endpoints, err = grantedEndpoints(spec, st, env.Metadata)
			return err
		},
		start: func(ctx context.Context) error {
			wr, err := train.Start(ctx, s.d.Temporal, train.Input{RunID: id, Spec: spec, EnvPlugin: env.ID, RewardPlugin: reward, Endpoints: endpoints}, ids)
			if err != nil {
				return temporalErr("start run", err)
			}
			out.Body.ID, out.Body.WorkflowID, out.Body.EnvPlugin = id, wr.GetID(), env.ID
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// listedWorkflow is a workflow of a listing with its string memo fields.
type listedWorkflow struct {
	WorkflowSummary
	memo map[string]string
}

// listByType lists workflows of one type, newest first, with their memos
// (runs and sweeps keep name, cluster and env there).
func (s *Server) listByType(ctx context.Context, typ string, limit int) ([]listedWorkflow, error) {
	resp, err := s.d.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: s.d.Namespace, PageSize: int32(limit), Query: "WorkflowType = '" + typ + "'",
	})
	if err != nil {
		return nil, temporalErr("list "+typ+" workflows", err)
	}
	var out []listedWorkflow
	for _, e := range resp.GetExecutions() {
		w := listedWorkflow{WorkflowSummary: summary(e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), e.GetType().GetName(), e.GetStatus(), "", e.GetStartTime().AsTime(), e.GetCloseTime()),
			memo: map[string]string{}}
		for k, p := range e.GetMemo().GetFields() {
			var v string
			if converter.GetDefaultDataConverter().FromPayload(p, &v) == nil {
				w.memo[k] = v
			}
		}
		out = append(out, w)
	}
	return out, nil
}

func (s *Server) checkpoints() *checkpoint.Store {
	return checkpoint.New(s.d.Store, checkpoint.Options{})
}

// getRun merges the workflow's state with the segment in flight.
func (s *Server) getRun(ctx context.Context, id string) (Run, error) {
	var r Run
	if !strings.HasPrefix(id, runPrefix) {
		return r, huma.Error404NotFound("run " + id + ": not found")
	}
	desc, err := s.d.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return r, temporalErr("run "+id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	w := summary(id, info.GetExecution().GetRunId(), info.GetType().GetName(), info.GetStatus(), "", info.GetStartTime().AsTime(), info.GetCloseTime())
	r.ID, r.Status, r.StartTime, r.CloseTime = id, w.Status, w.StartTime, w.CloseTime
	r.Progress.Metrics = []learner.Metrics{}
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if v, err := s.d.Temporal.QueryWorkflow(ctx, id, "", train.QueryProgress); err == nil {
			_ = v.Get(&r.Progress)
		}
		live := train.LiveOf(desc.GetPendingActivities())
		r.Live, r.LiveOutput, r.Loop, r.Waiting = live.Metrics, live.Output, live.Loop, live.Waiting
		r.Progress.Checkpoint = max(r.Progress.Checkpoint, live.Checkpoint)
	} else {
		err := s.d.Temporal.GetWorkflow(ctx, id, "").Get(ctx, &r.Progress)
		if err != nil {
			r.Error = err.Error()
			// A failed or cancelled run keeps its last state for the query.
			if v, qerr := s.d.Temporal.QueryWorkflow(ctx, id, "", train.QueryProgress); qerr == nil {
				_ = v.Get(&r.Progress)
			}
		}
	}
	if in, err := s.runInput(ctx, id); err == nil {
		r.Spec, r.Name, r.Cluster, r.Env = in.Spec, in.Spec.Name, in.Spec.Cluster, in.Spec.Env
	}
	if !r.Spec.Shape().Learns() {
		r.Scalars = s.latestScalars(ctx, id)
	}
	return r, nil
}

// runInput reads the run's input from its first history event.
func (s *Server) runInput(ctx context.Context, id string) (train.Input, error) {
	var in train.Input
	return in, s.workflowInput(ctx, id, &in)
}

// workflowInput decodes a workflow's input from its first history event.
func (s *Server) workflowInput(ctx context.Context, id string, in any) error {
	it := s.d.Temporal.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return errors.New("empty history")
	}
	ev, err := it.Next()
	if err != nil {
		return err
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return errors.New("first event is not WorkflowExecutionStarted")
	}
	return converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), in)
}

// runPlugin resolves a plugin reference of a run spec and checks its kind.
func (s *Server) runPlugin(ctx context.Context, loc, ref string, kind pluginhost.Kind) (pluginstore.Record, error) {
	r, err := s.d.PluginStore.Resolve(ctx, ref)
	switch {
	case errors.Is(err, pluginstore.ErrNotFound), errors.Is(err, pluginstore.ErrAmbiguous):
		return r, huma.Error422UnprocessableEntity("unknown plugin", &huma.ErrorDetail{Location: loc, Message: err.Error(), Value: ref})
	case err != nil:
		return r, huma.Error503ServiceUnavailable("look up plugin", err)
	}
	if r.Kind != string(kind) {
		return r, huma.Error422UnprocessableEntity("wrong plugin kind",
			&huma.ErrorDetail{Location: loc, Message: fmt.Sprintf("plugin %s@%s is a %s plugin, want %s", r.Name, r.Version, r.Kind, kind), Value: ref})
	}
	return r, nil
}

// RunLogLines renders a run's events and iterations as log lines.
func RunLogLines(r Run) []string {
	var out []string
	for _, rs := range r.Progress.Restores {
		out = append(out, fmt.Sprintf("restore  from checkpoint %d at iteration %d", rs.Checkpoint, rs.Iteration))
	}
	for _, m := range r.Progress.Metrics {
		out = append(out, strings.TrimRight(fmt.Sprintf("iter %5d  steps %9d  return %8.2f (min %.1f max %.1f, last100 %.2f)  sps %7.0f  %s",
			m.Iteration, m.Timesteps, m.EpisodeReturnMean, m.EpisodeReturnMin, m.EpisodeReturnMax, m.RecentReturnMean,
			m.StepsPerSecond, m.Brief()), " "))
	}
	for _, text := range []string{r.LiveOutput, r.Progress.Output} {
		for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			if l != "" {
				out = append(out, "out      "+l)
			}
		}
	}
	if r.Progress.Eval != nil {
		e := r.Progress.Eval
		out = append(out, fmt.Sprintf("eval     %d episodes: return %.2f (min %.1f max %.1f)", e.Episodes, e.ReturnMean, e.ReturnMin, e.ReturnMax))
	}
	if r.Progress.State != "" {
		line := "state    " + r.Progress.State
		if r.Progress.Reason != "" {
			line += ": " + r.Progress.Reason
		}
		out = append(out, line)
	}
	if r.Error != "" {
		out = append(out, "error    "+r.Error)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// fieldErrors turns a spec's joined *training.FieldError values into one 422
// naming each field.
// pinImports pins the checkpoints a run's policies are frozen from
// (training.Spec.PinImports); prefix is the run spec's place in the body.
func (s *Server) pinImports(ctx context.Context, spec *training.Spec, env envs.Spec, prefix string) error {
	err := spec.PinImports(ctx, s.checkpoints(), env)
	var fe *training.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return fieldErrors("invalid run spec", &training.FieldError{Field: prefix + fe.Field, Reason: fe.Reason})
	default:
		return huma.Error503ServiceUnavailable("read the checkpoints the run's policies are frozen from: "+err.Error(), err)
	}
}

func fieldErrors(title string, err error) error {
	var details []error
	for _, e := range unwrapAll(err) {
		var fe *training.FieldError
		if errors.As(e, &fe) {
			details = append(details, &huma.ErrorDetail{Location: "body." + fe.Field, Message: fe.Reason})
		}
	}
	var wes workspec.FieldErrors // a work description's
	if errors.As(err, &wes) {
		for _, fe := range wes {
			details = append(details, &huma.ErrorDetail{Location: "body." + fe.Field, Message: fe.Message})
		}
	}
	if len(details) == 0 {
		details = append(details, &huma.ErrorDetail{Location: "body", Message: err.Error()})
	}
	return huma.Error422UnprocessableEntity(title, details...)
}

func checkpointErr(what string, err error) error {
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		return huma.Error404NotFound(what + ": no such checkpoint")
	case errors.Is(err, checkpoint.ErrChecksum), errors.Is(err, checkpoint.ErrMissingChunk):
		return huma.Error500InternalServerError(what+": stored checkpoint is damaged: "+err.Error(), err)
	case strings.Contains(err.Error(), "checkpoint run name"):
		return huma.Error404NotFound(what + ": not found")
	}
	return huma.Error503ServiceUnavailable(what+": s3", err)
}
