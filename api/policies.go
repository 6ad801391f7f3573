package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/trainyard/trainyard/internal/admission"
	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/internal/workspec"
)

type bundleOutput struct {
	Body struct {
		Revision  string        `json:"revision"`
		Evaluator string        `json:"evaluator" doc:"What decides admissions with this bundle: wasm (the bundle compiled to WebAssembly by OPA, run in wazero), or topdown (OPA's interpreter) with why the bundle did not compile to WebAssembly."`
		Bundle    policy.Bundle `json:"bundle"`
	}
}

type bundleInput struct {
	Body policy.Bundle
}

type testOutput struct {
	Body struct {
		Passed  int                 `json:"passed"`
		Failed  int                 `json:"failed"`
		Results []policy.TestResult `json:"results"`
	}
}

type pushOutput struct {
	Body struct {
		Revision  string `json:"revision"`
		Tests     int    `json:"tests" doc:"Rego tests that passed before the bundle went in force."`
		Evaluator string `json:"evaluator" doc:"What decides admissions with this bundle: wasm (the bundle compiled to WebAssembly by OPA, run in wazero), or topdown (OPA's interpreter) with why the bundle did not compile to WebAssembly."`
	}
}

type dryRunOutput struct {
	Body struct {
		Revision  string          `json:"revision" doc:"Of the proposed bundle."`
		Evaluated int             `json:"evaluated" doc:"Recent submissions replayed."`
		Changes   []policy.Change `json:"changes" doc:"Only the submissions whose decision would change, and why."`
	}
}

type dryRunInput struct {
	Cluster string `query:"cluster" maxLength:"63" pattern:"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" doc:"Also decide this cluster's queued work on its live usage (it replaces the same work's recorded submission)."`
	Body    policy.Bundle
}

type decisionsInput struct {
	After int64 `query:"after" minimum:"0" doc:"Only decisions with a larger sequence number."`
	Limit int   `query:"limit" minimum:"1" maximum:"1000" default:"100"`
}

type decisionsOutput struct {
	Body struct {
		Decisions []policy.LogEntry `json:"decisions"`
	}
}

func (s *Server) registerPolicies() {
	huma.Register(s.API, op(http.MethodGet, "/v1/policies", "get-policies", "The policy bundle in force: Rego modules, data and revision", auth.Admin, "policies"),
		func(ctx context.Context, _ *struct{}) (*bundleOutput, error) {
			e := s.d.Admission.Engine()
			out := &bundleOutput{}
			out.Body.Revision, out.Body.Evaluator, out.Body.Bundle = e.Revision(), e.Evaluator(), e.Bundle()
			return out, nil
		})

	push := op(http.MethodPut, "/v1/policies", "put-policies",
		"Replace the policy bundle; refused unless it compiles and all its Rego tests pass", auth.Admin, "policies")
	push.Errors = append(push.Errors, http.StatusUnprocessableEntity)
	huma.Register(s.API, push, func(ctx context.Context, in *bundleInput) (*pushOutput, error) {
		e, results, err := s.d.Admission.Push(ctx, in.Body)
		if err != nil {
			return nil, bundleErr(err, results)
		}
		out := &pushOutput{}
		out.Body.Revision, out.Body.Tests, out.Body.Evaluator = e.Revision(), len(results), e.Evaluator()
		return out, nil
	})

	huma.Register(s.API, op(http.MethodPost, "/v1/policies/test", "test-policies", "Run the Rego unit tests of a proposed bundle", auth.Operator, "policies"),
		func(ctx context.Context, in *bundleInput) (*testOutput, error) {
			results, err := s.d.Admission.Test(ctx, in.Body)
			if err != nil {
				return nil, bundleErr(err, nil)
			}
			out := &testOutput{}
			out.Body.Results = append([]policy.TestResult{}, results...)
			for _, r := range results {
				if r.Pass {
					out.Body.Passed++
				} else if !r.Skip {
					out.Body.Failed++
				}
			}
			return out, nil
		})

	huma.Register(s.API, op(http.MethodPost, "/v1/policies/dry-run", "dry-run-policies",
		"Evaluate a proposed bundle against recent submissions and, with cluster, that cluster's queue on its live usage: which decisions would change and why", auth.Operator, "policies"),
		func(ctx context.Context, in *dryRunInput) (*dryRunOutput, error) {
			var live []admission.Submission
			if in.Cluster != "" {
				st, err := s.clusterStatus(ctx, in.Cluster)
				if err != nil {
					return nil, err
				}
				p := s.d.Admission.Engine().Params()
				for _, q := range st.Queue {
					live = append(live, admission.Submission{WorkID: q.WorkID, Input: st.AdmissionInput(p, q.WorkID, workspec.Spec(q.Work))})
				}
			}
			changes, n, err := s.d.Admission.DryRun(ctx, in.Body, live)
			if err != nil {
				return nil, bundleErr(err, nil)
			}
			out := &dryRunOutput{}
			out.Body.Revision, out.Body.Evaluated = in.Body.Revision(), n
			out.Body.Changes = append([]policy.Change{}, changes...)
			return out, nil
		})

	huma.Register(s.API, op(http.MethodGet, "/v1/admission/decisions", "list-decisions",
		"Admission decisions: input hash, policy revision, result and every violated rule", auth.Viewer, "policies"),
		func(ctx context.Context, in *decisionsInput) (*decisionsOutput, error) {
			out := &decisionsOutput{}
			out.Body.Decisions = append([]policy.LogEntry{}, s.d.Admission.Decisions(in.After, in.Limit)...)
			return out, nil
		})
}

func bundleErr(err error, results []policy.TestResult) error {
	var details []error
	for _, r := range results {
		if !r.Pass && !r.Skip {
			details = append(details, &huma.ErrorDetail{Location: "body.modules[" + r.Location + "]", Message: r.Name + ": " + r.Error})
		}
	}
	if errors.Is(err, admission.ErrTestsFailed) {
		return huma.Error422UnprocessableEntity("policy bundle rejected: its tests fail", details...)
	}
	return huma.Error422UnprocessableEntity("policy bundle rejected", &huma.ErrorDetail{Location: "body", Message: err.Error()})
}
