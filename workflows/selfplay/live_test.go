package selfplay

import (
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestLiveOf: a self-play batch's and a gauntlet's heartbeats as the API
// shows them (the loop's live games, the ephemeral sync's state).
func TestLiveOf(t *testing.T) {
	beat := func(p PlayProgress) *commonpb.Payloads {
		b, err := converter.GetDefaultDataConverter().ToPayloads(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	at := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	batch := &workflowpb.PendingActivityInfo{
		ActivityType:      &commonpb.ActivityType{Name: "SelfplayBatch"},
		HeartbeatDetails:  beat(PlayProgress{Synced: 12, Target: 24, Batches: 3}),
		LastHeartbeatTime: timestamppb.New(at),
		LastFailure:       &failurepb.Failure{Message: "agent lost"},
	}
	l := LiveOf([]*workflowpb.PendingActivityInfo{batch})
	if l.Play == nil || l.Play.Synced != 12 || l.Batch == nil || l.Batch.Progress != l.Play ||
		l.Batch.LastHeartbeat == nil || !l.Batch.LastHeartbeat.Equal(at) || l.Batch.LastFailure != "agent lost" {
		t.Errorf("self-play batch: %+v %+v", l, l.Batch)
	}

	fresh := LiveOf([]*workflowpb.PendingActivityInfo{{ActivityType: &commonpb.ActivityType{Name: "SelfplayBatch"}}})
	if fresh.Batch == nil || fresh.Batch.Progress != nil || fresh.Play != nil {
		t.Errorf("batch before its first beat: %+v", fresh)
	}

	gauntlet := LiveOf([]*workflowpb.PendingActivityInfo{{ActivityType: &commonpb.ActivityType{Name: "Gauntlet"}, HeartbeatDetails: beat(PlayProgress{Played: 4, Target: 8})}})
	if gauntlet.Play == nil || gauntlet.Play.Played != 4 || gauntlet.Batch != nil {
		t.Errorf("gauntlet: %+v", gauntlet)
	}
}
