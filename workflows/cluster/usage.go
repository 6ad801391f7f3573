package cluster

import (
	"maps"
	"slices"
	"strings"

	"github.com/trainyard/trainyard/internal/ledger"
	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/internal/policy/params"
)

// UsageReport is a cluster's usage ledger summed over the quota window, the
// quota state admission reads, and the queue (GET /v1/usage).
type UsageReport struct {
	Cluster string `json:"cluster"`
	ledger.Summary
	Tier1CapacitySeconds float64       `json:"tier1_capacity_seconds" doc:"Tier-1 GPUs × the window: what config quotas are shares of."`
	Quotas               []ConfigQuota `json:"quotas" doc:"Each config with usage or a quota: its Tier-1 share and its quota."`
	Queue                []QueueItem   `json:"queue" doc:"Waiting work in scheduling order, with how long each has waited and why."`
}

// ConfigQuota is one config's Tier-1 share against its quota.
type ConfigQuota struct {
	Config           string  `json:"config"`
	Tier1GPUSeconds  float64 `json:"tier1_gpu_seconds"`
	Tier1Share       float64 `json:"tier1_share"`
	Quota            float64 `json:"quota,omitempty" doc:"The config's quota (a share of Tier-1 time); absent when it has none."`
	RunningTrainings int     `json:"running_trainings"`
}

// UsageReport sums the snapshot's ledger with p: the breakdowns, and each
// config that has usage or a quota of its own (a pattern such as square8_*
// names no config) against its quota, as admission sees it.
func (s Status) UsageReport(p params.Params) UsageReport {
	sum := s.Usage(p)
	q := policy.UsageFromLedger(p, s.SchedulerNodes(), ledger.Quota{Tier1GPUSecondsByConfig: sum.Tier1GPUSecondsByConfig, RunningTrainingByConfig: sum.RunningTrainingByConfig})
	r := UsageReport{Cluster: s.Cluster, Summary: sum, Tier1CapacitySeconds: q.Tier1CapacitySeconds, Queue: append([]QueueItem{}, s.Queue...), Quotas: []ConfigQuota{}}
	configs := map[string]bool{}
	for c := range sum.GPUSecondsByConfig {
		configs[c] = true
	}
	for c := range sum.RunningTrainingByConfig {
		configs[c] = true
	}
	for c := range p.ConfigQuotas {
		if !strings.Contains(c, "*") {
			configs[c] = true
		}
	}
	for _, c := range slices.Sorted(maps.Keys(configs)) {
		cq := ConfigQuota{Config: c, Tier1GPUSeconds: sum.Tier1GPUSecondsByConfig[c], RunningTrainings: sum.RunningTrainingByConfig[c]}
		if q.Tier1CapacitySeconds > 0 {
			cq.Tier1Share = cq.Tier1GPUSeconds / q.Tier1CapacitySeconds
		}
		cq.Quota, _ = p.Quota(c)
		r.Quotas = append(r.Quotas, cq)
	}
	return r
}
