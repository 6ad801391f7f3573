package policy

import (
	"slices"
	"strings"
	"time"

	"github.com/trainyard/trainyard/internal/ledger"
	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/scheduler"
)

// UsageRecord is GPU time a piece of work held on a node. End is zero
// while it still runs.
type UsageRecord struct {
	WorkID string
	Config string
	Kind   string
	Node   string
	GPUs   float64 // devices held (fractions allowed)
	Start  time.Time
	End    time.Time
}

// AggregateUsage turns raw records into the totals the quota policy reads:
// each config's Tier-1 GPU seconds inside the rolling window ending at now,
// the Tier-1 capacity of the window (Tier-1 GPUs × window length), and the
// running training jobs per config. now is passed in (workflow-safe).
func AggregateUsage(p params.Params, nodes []scheduler.Node, records []UsageRecord, now time.Time) Usage {
	window := p.QuotaWindow()
	from := now.Add(-window)
	tier1 := map[string]bool{}
	gpus := 0
	for _, n := range nodes {
		if tierOf(p, n) == 1 {
			tier1[n.Name] = true
			gpus += len(n.Capacity.GPUs)
		}
	}
	u := Usage{
		Tier1CapacitySeconds:    float64(gpus) * window.Seconds(),
		Tier1GPUSecondsByConfig: map[string]float64{},
		RunningTrainingByConfig: map[string]int{},
	}
	training := map[string]map[string]bool{}
	for _, r := range records {
		end := r.End
		running := end.IsZero()
		if running {
			end = now
		}
		if running && r.Kind == "training" {
			if training[r.Config] == nil {
				training[r.Config] = map[string]bool{}
			}
			training[r.Config][r.WorkID] = true
		}
		if !tier1[r.Node] {
			continue
		}
		start := r.Start
		if start.Before(from) {
			start = from
		}
		if d := end.Sub(start); d > 0 {
			u.Tier1GPUSecondsByConfig[r.Config] += d.Seconds() * r.GPUs
		}
	}
	for cfg, ids := range training {
		u.RunningTrainingByConfig[cfg] = len(ids)
	}
	return u
}

// UsageFromLedger is the quota state the policies read: the ledger's
// Tier-1 GPU seconds per config over the window and its running trainings,
// with the Tier-1 capacity of the window from the nodes as they are.
func UsageFromLedger(p params.Params, nodes []scheduler.Node, q ledger.Quota) Usage {
	gpus := 0
	for _, n := range nodes {
		if tierOf(p, n) == 1 {
			gpus += len(n.Capacity.GPUs)
		}
	}
	return Usage{
		Tier1CapacitySeconds:    float64(gpus) * p.QuotaWindow().Seconds(),
		Tier1GPUSecondsByConfig: q.Tier1GPUSecondsByConfig,
		RunningTrainingByConfig: q.RunningTrainingByConfig,
	}
}

// UsageRules are the rules decided on the live usage: work they deny
// waits (in the cluster's queue, with the rule as its reason) until usage
// changes, instead of being refused.
var UsageRules = []string{"config_quota", "one_training_per_config"}

// UsageViolations are d's violations of usage rules, as one line (empty
// when there are none).
func (d Decision) UsageViolations() string {
	var parts []string
	for _, v := range d.Violations {
		if slices.Contains(UsageRules, v.Rule) {
			parts = append(parts, v.Rule+": "+v.Reason)
		}
	}
	return strings.Join(parts, "; ")
}

// WaitsOnUsage says whether d denies only by usage rules.
func (d Decision) WaitsOnUsage() bool {
	if d.Allow || len(d.Violations) == 0 {
		return false
	}
	for _, v := range d.Violations {
		if !slices.Contains(UsageRules, v.Rule) {
			return false
		}
	}
	return true
}
