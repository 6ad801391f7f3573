package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/workflows/healthcheck"
)

// WorkflowRef names a started workflow.
type WorkflowRef struct {
	WorkflowID string `json:"workflow_id" example:"healthcheck-3f2a"`
	RunID      string `json:"run_id"`
}

type startHealthcheckInput struct {
	Body struct {
		Note string `json:"note,omitempty" maxLength:"256" doc:"Free text written to S3 and echoed back." example:"smoke test"`
	}
}

type workflowRefOutput struct {
	Body WorkflowRef
}

// WorkflowSummary is one workflow as Temporal's visibility sees it.
type WorkflowSummary struct {
	WorkflowID string     `json:"workflow_id"`
	RunID      string     `json:"run_id"`
	Type       string     `json:"type"`
	Status     string     `json:"status" enum:"running,completed,failed,canceled,terminated,continued_as_new,timed_out,unknown"`
	TaskQueue  string     `json:"task_queue,omitempty"`
	StartTime  time.Time  `json:"start_time"`
	CloseTime  *time.Time `json:"close_time,omitempty"`
}

type workflowOutput struct {
	Body struct {
		WorkflowSummary
		Result any    `json:"result,omitempty" doc:"The workflow's return value once completed."`
		Error  string `json:"error,omitempty" doc:"Why the workflow failed, once failed."`
	}
}

type listWorkflowsInput struct {
	Limit int `query:"limit" minimum:"1" maximum:"1000" default:"50"`
}

type listWorkflowsOutput struct {
	Body struct {
		Workflows []WorkflowSummary `json:"workflows"`
	}
}

type workflowIDInput struct {
	ID string `path:"id" maxLength:"255"`
}

// HistoryEvent is one event of a workflow's history.
type HistoryEvent struct {
	ID   int64     `json:"id"`
	Type string    `json:"type" example:"WorkflowExecutionStarted"`
	Time time.Time `json:"time"`
}

type historyOutput struct {
	Body struct {
		WorkflowID string         `json:"workflow_id"`
		Events     []HistoryEvent `json:"events"`
	}
}

func (s *Server) registerWorkflows() {
	start := op(http.MethodPost, "/v1/healthchecks", "start-healthcheck",
		"Start a health-check workflow (API → Temporal → worker → S3 round trip)", auth.Operator, "system")
	start.DefaultStatus = http.StatusCreated
	huma.Register(s.API, start, func(ctx context.Context, in *startHealthcheckInput) (*workflowRefOutput, error) {
		run, err := healthcheck.Start(ctx, s.d.Temporal, "healthcheck-"+uuid.NewString(), healthcheck.Input{Note: in.Body.Note})
		if err != nil {
			return nil, temporalErr("start healthcheck", err)
		}
		return &workflowRefOutput{Body: WorkflowRef{WorkflowID: run.GetID(), RunID: run.GetRunID()}}, nil
	})

	huma.Register(s.API, op(http.MethodGet, "/v1/workflows", "list-workflows",
		"List recent workflows of every kind", auth.Viewer, "workflows"),
		func(ctx context.Context, in *listWorkflowsInput) (*listWorkflowsOutput, error) {
			resp, err := s.d.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: s.d.Namespace, PageSize: int32(in.Limit),
			})
			if err != nil {
				return nil, temporalErr("list workflows", err)
			}
			out := &listWorkflowsOutput{}
			out.Body.Workflows = []WorkflowSummary{}
			for _, e := range resp.GetExecutions() {
				out.Body.Workflows = append(out.Body.Workflows, summary(e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(),
					e.GetType().GetName(), e.GetStatus(), e.GetTaskQueue(), e.GetStartTime().AsTime(), e.GetCloseTime()))
			}
			return out, nil
		})

	huma.Register(s.API, op(http.MethodGet, "/v1/workflows/{id}", "get-workflow",
		"A workflow's status and, once finished, its result or error", auth.Viewer, "workflows"),
		func(ctx context.Context, in *workflowIDInput) (*workflowOutput, error) {
			desc, err := s.d.Temporal.DescribeWorkflowExecution(ctx, in.ID, "")
			if err != nil {
				return nil, temporalErr("workflow "+in.ID, err)
			}
			info := desc.GetWorkflowExecutionInfo()
			out := &workflowOutput{}
			out.Body.WorkflowSummary = summary(info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId(),
				info.GetType().GetName(), info.GetStatus(), info.GetTaskQueue(), info.GetStartTime().AsTime(), info.GetCloseTime())
			if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				var result any
				if err := s.d.Temporal.GetWorkflow(ctx, in.ID, info.GetExecution().GetRunId()).Get(ctx, &result); err != nil {
					out.Body.Error = err.Error()
				} else {
					out.Body.Result = result
				}
			}
			return out, nil
		})

	huma.Register(s.API, op(http.MethodGet, "/v1/workflows/{id}/history", "get-workflow-history",
		"Every event of a workflow's latest run", auth.Viewer, "workflows"),
		func(ctx context.Context, in *workflowIDInput) (*historyOutput, error) {
			it := s.d.Temporal.GetWorkflowHistory(ctx, in.ID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			out := &historyOutput{}
			out.Body.WorkflowID = in.ID
			out.Body.Events = []HistoryEvent{}
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					return nil, temporalErr("history of "+in.ID, err)
				}
				out.Body.Events = append(out.Body.Events, HistoryEvent{ID: ev.GetEventId(), Type: ev.GetEventType().String(), Time: ev.GetEventTime().AsTime()})
			}
			return out, nil
		})
}

// summary builds a WorkflowSummary; an unset close time means still open.
func summary(id, runID, typ string, st enumspb.WorkflowExecutionStatus, tq string, startTime time.Time, closeTime *timestamppb.Timestamp) WorkflowSummary {
	w := WorkflowSummary{WorkflowID: id, RunID: runID, Type: typ, Status: statusName(st), TaskQueue: tq, StartTime: startTime}
	if closeTime != nil && closeTime.IsValid() && closeTime.AsTime().Unix() > 0 {
		t := closeTime.AsTime()
		w.CloseTime = &t
	}
	return w
}

func statusName(st enumspb.WorkflowExecutionStatus) string {
	switch st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "running"
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "completed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "canceled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued_as_new"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed_out"
	default:
		return "unknown"
	}
}

// temporalErr maps Temporal's errors onto problem details.
func temporalErr(what string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return huma.Error404NotFound(what + ": not found")
	}
	var inv *serviceerror.InvalidArgument
	if errors.As(err, &inv) {
		return huma.Error422UnprocessableEntity(fmt.Sprintf("%s: %s", what, inv.Message))
	}
	// Too busy to answer in time (a burst of requests, each a workflow task
	// or query): refuse cleanly and say when to come back, not a 5xx.
	var busy *serviceerror.ResourceExhausted
	var slow *serviceerror.DeadlineExceeded
	if errors.As(err, &busy) || errors.As(err, &slow) || errors.Is(err, context.DeadlineExceeded) {
		return huma.ErrorWithHeaders(huma.Error429TooManyRequests(fmt.Sprintf("%s: the control plane is busy (%v); retry shortly", what, err)),
			http.Header{"Retry-After": {"5"}})
	}
	return huma.Error503ServiceUnavailable(fmt.Sprintf("%s: temporal: %v", what, err))
}
