package selfplay

import (
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
)

// Live is what a loop's activities in flight last reported in their
// heartbeats, which its state query cannot say (they reach Temporal, not
// the workflow): readers describe the loop's workflow and have its pending
// activities decoded here, beside the activities that send them.
type Live struct {
	// Play is the games of whatever plays now (a self-play batch or a
	// gauntlet); nil when nothing has reported.
	Play *PlayProgress
	// Batch is set while a self-play batch runs: it uploads finished games
	// every sync_interval (the loop's ephemeral sync).
	Batch *BatchInFlight
}

// BatchInFlight is a running self-play batch.
type BatchInFlight struct {
	Progress      *PlayProgress // nil before its first heartbeat
	LastHeartbeat *time.Time
	LastFailure   string // its previous attempt's, when it was retried
}

// LiveOf decodes a loop's pending activities.
func LiveOf(pending []*workflowpb.PendingActivityInfo) Live {
	var l Live
	dc := converter.GetDefaultDataConverter()
	for _, pa := range pending {
		var p *PlayProgress
		if d := pa.GetHeartbeatDetails(); d != nil {
			var v PlayProgress
			if dc.FromPayloads(d, &v) == nil && v.Target > 0 {
				p = &v
				l.Play = p
			}
		}
		// Registered from the struct, the activity is named by its method.
		if pa.GetActivityType().GetName() == "SelfplayBatch" {
			b := &BatchInFlight{Progress: p}
			if t := pa.GetLastHeartbeatTime(); t != nil {
				at := t.AsTime()
				b.LastHeartbeat = &at
			}
			if f := pa.GetLastFailure(); f != nil {
				b.LastFailure = f.GetMessage()
			}
			l.Batch = b
		}
	}
	return l
}
