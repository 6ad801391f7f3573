package policy

import (
	"slices"
	"strings"
	"time"

	"github.com/trainyard/trainyard/internal/ledger"
	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/scheduler"
)

// UsageRecord is GPU time a piece of work held on a node: a ledger entry.
type UsageRecord = ledger.Entry

// AggregateUsage turns raw records into the totals the quota policy reads
// (UsageFromLedger), taking each record's tier from its node in nodes when
// the record does not carry the node's VRAM. now is passed in
// (workflow-safe).
func AggregateUsage(p params.Params, nodes []scheduler.Node, records []UsageRecord, now time.Time) Usage {
	vram := map[string]int{}
	for _, n := range nodes {
		vram[n.Name] = n.Capacity.TotalVRAMMB()
	}
	b := ledger.Book{Records: make([]ledger.Entry, len(records))}
	for i, r := range records {
		if r.NodeVRAMMB == 0 {
			r.NodeVRAMMB = vram[r.Node]
		}
		b.Records[i] = r
	}
	return UsageFromLedger(p, nodes, b.Quota(p, now))
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

// UsageViolations are d's violations of usage rules (those whose deny
// entry says "waits": true), as one line (empty when there are none).
func (d Decision) UsageViolations() string {
	var parts []string
	for _, v := range d.Violations {
		if v.Waits {
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
		if !v.Waits {
			return false
		}
	}
	return true
}

// Beyond lists d's violations that base lacks ("rule: reason; ..."): what
// a proposed placement adds to the decision on the work alone.
func (d Decision) Beyond(base Decision) string {
	var parts []string
	for _, v := range d.Violations {
		if !slices.Contains(base.Violations, v) {
			parts = append(parts, v.Rule+": "+v.Reason)
		}
	}
	return strings.Join(parts, "; ")
}
