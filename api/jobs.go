package api

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/names"
	"github.com/trainyard/trainyard/internal/workspec"
	"github.com/trainyard/trainyard/workflows/job"
)

// workJobInput is a job described as work: roles with counts, resources,
// colocation groups, strategy, affinity and each role's command.
type workJobInput struct {
	Body struct {
		Cluster string `json:"cluster" minLength:"1" maxLength:"63" doc:"Cluster whose nodes run it."`
		workspec.Spec
		Command         []string          `json:"command,omitempty" doc:"The command of roles that name none."`
		Env             map[string]string `json:"env,omitempty" doc:"Extra environment for every instance (the rest is a minimal allow-list; TRAINYARD_ROLE, TRAINYARD_INSTANCE and TRAINYARD_MAX_CONCURRENCY are set per instance)."`
		InfeasibleGrace string            `json:"infeasible_grace,omitempty" maxLength:"20" doc:"How long a job no node could ever take waits for the cluster to change before it fails (e.g. 5m, the default)."`
	}
}

func (s *Server) registerWorkJobs() {
	o := op(http.MethodPost, "/v1/jobs", "submit-work-job",
		"Run a job described as work: its roles are admitted with the live usage, placed all-or-nothing as one gang (groups, strategy, affinity), and each instance runs its role's command", auth.Operator, "jobs")
	o.DefaultStatus = http.StatusCreated
	huma.Register(s.API, o, s.submitWorkJob)
}

func (s *Server) submitWorkJob(ctx context.Context, in *workJobInput) (*workflowRefOutput, error) {
	b := &in.Body
	ws := b.Spec
	if ws.Kind == "" {
		ws.Kind = workspec.KindJob
	}
	id := "job-" + uuid.NewString()
	if ws.Name == "" {
		ws.Name = id[:12]
	}
	ws.ApplyDefaults()
	if err := ws.Validate(); err != nil {
		return nil, fieldErrors("invalid job", err)
	}
	for i, r := range ws.Roles {
		if len(r.Command) == 0 && len(b.Command) == 0 {
			return nil, huma.Error422UnprocessableEntity("invalid job", &huma.ErrorDetail{Location: fmt.Sprintf("body.roles[%d].command", i), Message: "role " + r.Name + " has no command, and the job names no default command"})
		}
	}
	if err := envKeyErrors(b.Env); err != nil {
		return nil, err
	}
	grace, err := optDuration("body.infeasible_grace", b.InfeasibleGrace)
	if err != nil {
		return nil, err
	}
	return s.submitJob(ctx, id, job.Input{Cluster: b.Cluster, Command: b.Command, Env: b.Env, Work: &ws, InfeasibleGrace: grace})
}

// submitJob submits a job of either route (POST /v1/jobs, POST
// /v1/clusters/{name}/jobs), its work described in in.Work.
func (s *Server) submitJob(ctx context.Context, id string, in job.Input) (*workflowRefOutput, error) {
	out := &workflowRefOutput{}
	err := s.submit(ctx, submission{
		cluster: in.Cluster,
		units:   []unit{{id: id, what: "job", loc: "body", work: *in.Work}},
		start: func(ctx context.Context) error {
			run, err := job.Start(ctx, s.d.Temporal, id, in)
			if err != nil {
				return temporalErr("submit job", err)
			}
			out.Body = WorkflowRef{WorkflowID: run.GetID(), RunID: run.GetRunID()}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// envKeyErrors refuses, at the door, variable names a node would refuse
// (names.EnvKey): every bad key, each a field of its own.
func envKeyErrors(env map[string]string) error {
	var details []error
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if err := names.EnvKey.Check(k); err != nil {
			details = append(details, &huma.ErrorDetail{Location: "body.env." + k, Message: err.Error()})
		}
	}
	if len(details) > 0 {
		return huma.Error422UnprocessableEntity("invalid environment", details...)
	}
	return nil
}
