package api

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/ledger"
	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/workflows/cluster"
)

type usageInput struct {
	Cluster string `query:"cluster" required:"true" maxLength:"63" pattern:"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" doc:"The cluster whose ledger to sum."`
}

// UsageReport is a cluster's usage ledger summed over the quota window, the
// quota state admission reads, and the queue.
type UsageReport struct {
	Cluster string `json:"cluster"`
	ledger.Summary
	// Quotas is what admission sees: Tier-1 capacity of the window and
	// each config's share of it against its quota.
	Tier1CapacitySeconds float64             `json:"tier1_capacity_seconds" doc:"Tier-1 GPUs × the window: what config quotas are shares of."`
	Quotas               []ConfigQuota       `json:"quotas" doc:"Each config with usage or a quota: its Tier-1 share and its quota."`
	Queue                []cluster.QueueItem `json:"queue" doc:"Waiting work in scheduling order, with how long each has waited and why."`
}

// ConfigQuota is one config's Tier-1 share against its quota.
type ConfigQuota struct {
	Config           string  `json:"config"`
	Tier1GPUSeconds  float64 `json:"tier1_gpu_seconds"`
	Tier1Share       float64 `json:"tier1_share"`
	Quota            float64 `json:"quota,omitempty" doc:"The config's quota (a share of Tier-1 time); absent when it has none."`
	RunningTrainings int     `json:"running_trainings"`
}

type usageOutput struct {
	Body UsageReport
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
	p := s.d.Admission.Engine().Params()
	sum := st.Usage(p)
	q := policy.UsageFromLedger(p, st.SchedulerNodes(), ledger.Quota{Tier1GPUSecondsByConfig: sum.Tier1GPUSecondsByConfig, RunningTrainingByConfig: sum.RunningTrainingByConfig})
	out := &usageOutput{Body: UsageReport{Cluster: in.Cluster, Summary: sum, Tier1CapacitySeconds: q.Tier1CapacitySeconds, Queue: append([]cluster.QueueItem{}, st.Queue...)}}
	configs := map[string]bool{}
	for c := range sum.GPUSecondsByConfig {
		configs[c] = true
	}
	for c := range sum.RunningTrainingByConfig {
		configs[c] = true
	}
	for c := range p.ConfigQuotas {
		if !strings.Contains(c, "*") { // a pattern is no config
			configs[c] = true
		}
	}
	out.Body.Quotas = []ConfigQuota{}
	for _, c := range slices.Sorted(maps.Keys(configs)) {
		cq := ConfigQuota{Config: c, Tier1GPUSeconds: sum.Tier1GPUSecondsByConfig[c], RunningTrainings: sum.RunningTrainingByConfig[c]}
		if q.Tier1CapacitySeconds > 0 {
			cq.Tier1Share = cq.Tier1GPUSeconds / q.Tier1CapacitySeconds
		}
		cq.Quota, _ = p.Quota(c)
		out.Body.Quotas = append(out.Body.Quotas, cq)
	}
	return out, nil
}
