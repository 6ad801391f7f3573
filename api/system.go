package api

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

type healthOutput struct {
	Body struct {
		Status string `json:"status" example:"ok"`
	}
}

type readyOutput struct {
	Body struct {
		Status string            `json:"status" example:"ready"`
		Checks map[string]string `json:"checks" doc:"Each dependency and either ok or why it is not ready."`
	}
}

type whoamiOutput struct {
	Body struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		Role string `json:"role"`
	}
}

func (s *Server) registerSystem() {
	huma.Register(s.API, op(http.MethodGet, "/healthz", "healthz", "Liveness: the process serves HTTP", "", "system"),
		func(ctx context.Context, _ *struct{}) (*healthOutput, error) {
			out := &healthOutput{}
			out.Body.Status = "ok"
			return out, nil
		})

	readyOp := op(http.MethodGet, "/readyz", "readyz", "Readiness: Temporal, S3 and the worker are up", "", "system")
	readyOp.Errors = []int{http.StatusServiceUnavailable}
	huma.Register(s.API, readyOp, func(ctx context.Context, _ *struct{}) (*readyOutput, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		out := &readyOutput{}
		out.Body.Checks = map[string]string{}
		var failed []error
		names := make([]string, 0, len(s.d.Ready))
		for name := range s.d.Ready {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if err := s.d.Ready[name](ctx); err != nil {
				out.Body.Checks[name] = err.Error()
				failed = append(failed, &huma.ErrorDetail{Location: name, Message: err.Error()})
			} else {
				out.Body.Checks[name] = "ok"
			}
		}
		if len(names) == 0 {
			failed = append(failed, &huma.ErrorDetail{Message: "no readiness checks configured"})
		}
		if len(failed) > 0 {
			return nil, huma.Error503ServiceUnavailable("not ready", failed...)
		}
		out.Body.Status = "ready"
		return out, nil
	})

	huma.Register(s.API, op(http.MethodGet, "/v1/whoami", "whoami", "The token this request authenticated with", "viewer", "system"),
		func(ctx context.Context, _ *struct{}) (*whoamiOutput, error) {
			tok, _ := TokenFrom(ctx)
			out := &whoamiOutput{}
			out.Body.ID, out.Body.Name, out.Body.Role = tok.ID, tok.Name, string(tok.Role)
			return out, nil
		})
}
