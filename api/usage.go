package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/workflows/cluster"
)

type usageInput struct {
	Cluster string `query:"cluster" required:"true" maxLength:"63" pattern:"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" doc:"The cluster whose ledger to sum."`
}

type usageOutput struct {
	Body cluster.UsageReport
}

func (s *Server) registerUsage() {
	huma.Register(s.API, op(http.MethodGet, "/v1/usage", "get-usage",
		"A cluster's usage ledger over the quota window: GPU-seconds by config, kind, tier and provider, running trainings per config, each config's Tier-1 share against its quota, and the queue with waiting times",
		auth.Viewer, "clusters"), s.getUsage)
}

func (s *Server) getUsage(ctx context.Context, in *usageInput) (*usageOutput, error) {
	st, err := s.clusterStatus(ctx, in.Cluster)
	if err != nil {
		return nil, err
	}
	return &usageOutput{Body: st.UsageReport(s.d.Admission.Engine().Params())}, nil
}
