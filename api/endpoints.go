package api

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/inference"
)

// EndpointHealth is an inference endpoint of a cluster with its health as
// the control plane sees it.
type EndpointHealth struct {
	inference.Endpoint
	Healthy   bool      `json:"healthy"`
	Models    []string  `json:"models,omitempty" doc:"Models GET /v1/models lists."`
	LatencyMS float64   `json:"latency_ms"`
	Error     string    `json:"error,omitempty"`
	CheckedAt time.Time `json:"checked_at"`
}

type clusterEndpointsInput struct {
	Name string `path:"name" maxLength:"63"`
}

type clusterEndpointsOutput struct {
	Body struct {
		Cluster   string           `json:"cluster"`
		Endpoints []EndpointHealth `json:"endpoints"`
	}
}

// registerEndpoints: the inference endpoints a cluster's spec declares,
// health-checked now (GET /v1/models, 5 s each, in parallel) from the
// control plane; credentials_ref is resolved in the server's environment.
func (s *Server) registerEndpoints() {
	huma.Register(s.API, op(http.MethodGet, "/v1/clusters/{name}/endpoints", "cluster-endpoints",
		"A cluster's inference endpoints and their health (GET /v1/models lists the declared model)", auth.Viewer, "clusters"),
		func(ctx context.Context, in *clusterEndpointsInput) (*clusterEndpointsOutput, error) {
			st, err := s.clusterStatus(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			out := &clusterEndpointsOutput{}
			out.Body.Cluster = in.Name
			out.Body.Endpoints = checkEndpoints(ctx, st.Endpoints, 5*time.Second)
			return out, nil
		})
}

func checkEndpoints(ctx context.Context, eps []inference.Endpoint, timeout time.Duration) []EndpointHealth {
	out := make([]EndpointHealth, len(eps))
	var wg sync.WaitGroup
	for i, e := range eps {
		wg.Go(func() {
			h := EndpointHealth{Endpoint: e, CheckedAt: time.Now().UTC()}
			c, err := inference.NewClient(e, inference.ClientOptions{})
			if err != nil {
				h.Error = err.Error()
			} else {
				cctx, cancel := context.WithTimeout(ctx, timeout)
				r := c.Check(cctx)
				cancel()
				h.Healthy, h.Models, h.Error, h.CheckedAt = r.Healthy, r.Models, r.Error, r.CheckedAt
				h.LatencyMS = float64(r.Latency.Microseconds()) / 1000
			}
			out[i] = h
		})
	}
	wg.Wait()
	return out
}
