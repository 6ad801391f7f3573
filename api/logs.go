package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/logstream"
	"github.com/trainyard/trainyard/workflows/job"
	"github.com/trainyard/trainyard/workflows/train"
)

// LogQuery is how much of a process log to send, and whether to follow it.
type LogQuery struct {
	Follow bool  `query:"follow" doc:"Keep the response open and send new output as it is uploaded (about every second), until the job or run ends."`
	From   int64 `query:"from" minimum:"0" maximum:"1000000000000000" doc:"Position in the log to start at, in bytes as printed (positions never move: rotation leaves a gap, reported in the text)."`
}

type jobLogsInput struct {
	ID       string `path:"id" maxLength:"255"`
	Instance int    `query:"instance" minimum:"0" maximum:"100000" doc:"Which instance of a gang job (0 for a single-process job), in the order GET /v1/jobs/{id} lists them."`
	LogQuery
}

type runOutputInput struct {
	ID   string `path:"id" maxLength:"255"`
	Rank int    `query:"rank" minimum:"0" maximum:"63" doc:"A multi-node run's rank (0, the default, for a single-process run)."`
	LogQuery
}

// logOperation documents a route that answers with the log as plain text.
func logOperation(path, id, summary, tag string) huma.Operation {
	o := op(http.MethodGet, path, id, summary, auth.Viewer, tag)
	o.Description += " The process's stdout and stderr as they were printed, uploaded to S3 by its node about every second " +
		"(`logs/` in the bucket; docs/scheduling.md). Plain text; with `follow=true` the response is streamed (chunked) " +
		"and ends when the work ends."
	o.Responses = map[string]*huma.Response{"200": {
		Description: "The log from `from` on.",
		Content:     map[string]*huma.MediaType{"text/plain; charset=utf-8": {Schema: &huma.Schema{Type: "string"}}},
	}}
	return o
}

func (s *Server) registerLogs() {
	huma.Register(s.API, logOperation("/v1/jobs/{id}/logs", "get-job-logs", "A job instance's output, live", "jobs"),
		func(ctx context.Context, in *jobLogsInput) (*huma.StreamResponse, error) {
			return s.streamLog(ctx, "job "+in.ID, in.ID, job.Name, logstream.JobPrefix(in.ID, in.Instance), in.LogQuery)
		})
	huma.Register(s.API, logOperation("/v1/runs/{id}/output", "get-run-output", "A command run's trainer output, live", "runs"),
		func(ctx context.Context, in *runOutputInput) (*huma.StreamResponse, error) {
			if !strings.HasPrefix(in.ID, runPrefix) {
				return nil, huma.Error404NotFound("run " + in.ID + ": not found")
			}
			return s.streamLog(ctx, "run "+in.ID, in.ID, train.Name, logstream.RankPrefix(in.ID, in.Rank), in.LogQuery)
		})
}

// streamLog answers with the log under prefix of workflow id (of type
// typ); a follow ends once the workflow has closed and every chunk written
// before has been sent.
func (s *Server) streamLog(ctx context.Context, what, id, typ, prefix string, q LogQuery) (*huma.StreamResponse, error) {
	if s.d.Store == nil {
		return nil, huma.Error503ServiceUnavailable(what + ": logs need S3, and this server has none")
	}
	desc, err := s.d.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil, temporalErr(what, err)
	}
	if desc.GetWorkflowExecutionInfo().GetType().GetName() != typ {
		return nil, huma.Error404NotFound(what + ": not found")
	}
	var ended func(context.Context) (bool, error)
	if q.Follow {
		// Asked before each look for chunks; Temporal at most once a second.
		var asked time.Time
		ended = func(ctx context.Context) (bool, error) {
			if time.Since(asked) < time.Second {
				return false, nil
			}
			asked = time.Now()
			d, err := s.d.Temporal.DescribeWorkflowExecution(ctx, id, "")
			if err != nil {
				return false, err
			}
			return d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
		}
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		hctx.SetHeader("Content-Type", "text/plain; charset=utf-8")
		hctx.SetHeader("Cache-Control", "no-store")
		hctx.SetHeader("X-Content-Type-Options", "nosniff")
		w := hctx.BodyWriter()
		hctx.SetStatus(http.StatusOK)
		flush := func() {}
		if rw, ok := w.(http.ResponseWriter); ok {
			rc := http.NewResponseController(rw)
			flush = func() { _ = rc.Flush() }
		}
		flush() // headers now: a follow may wait a while for its first chunk
		_, err := logstream.Reader{Store: s.d.Store, Prefix: prefix}.Copy(hctx.Context(), w, q.From, flush, ended)
		if err != nil && hctx.Context().Err() == nil {
			// The status is sent; say so in the text.
			fmt.Fprintf(w, "\n[trainyard: reading the log failed: %v]\n", err)
			s.d.Logger.Warn("log stream failed", "log", prefix, "err", err)
		}
	}}, nil
}
