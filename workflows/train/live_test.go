package train

import (
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/training"
)

func pending(t *testing.T, activity string, beat any) *workflowpb.PendingActivityInfo {
	t.Helper()
	pa := &workflowpb.PendingActivityInfo{ActivityType: &commonpb.ActivityType{Name: activity}}
	if beat != nil {
		p, err := converter.GetDefaultDataConverter().ToPayloads(beat)
		if err != nil {
			t.Fatal(err)
		}
		pa.HeartbeatDetails = p
	}
	return pa
}

// TestLiveOf: each shape's heartbeats read back as the API shows them.
func TestLiveOf(t *testing.T) {
	loss := 0.5
	for _, tc := range []struct {
		name    string
		pending []*workflowpb.PendingActivityInfo
		check   func(t *testing.T, l Live)
	}{
		{"nothing in flight", nil, func(t *testing.T, l Live) {
			if l.Metrics != nil || l.Loop != nil || l.Output != "" || l.Checkpoint != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"a segment, before and after its first beat", []*workflowpb.PendingActivityInfo{
			pending(t, "RunSegment", nil),
			pending(t, "RunSegment", learner.Metrics{Iteration: 7, EpisodeReturnMean: 30}),
		}, func(t *testing.T, l Live) {
			if l.Metrics == nil || l.Metrics.Iteration != 7 || l.Output != "" {
				t.Errorf("%+v", l)
			}
		}},
		{"a command gang: rank 0's output, the newest checkpoint", []*workflowpb.PendingActivityInfo{
			pending(t, "RunCommand", training.CommandStatus{Rank: 1, Output: "rank 1", Checkpoint: 4}),
			pending(t, "RunCommand", training.CommandStatus{Rank: 0, Output: "rank 0", Checkpoint: 3}),
		}, func(t *testing.T, l Live) {
			if l.Output != "rank 0" || l.Checkpoint != 4 || l.Metrics != nil {
				t.Errorf("%+v", l)
			}
		}},
		{"an LLM loop: the trainer and two workers", []*workflowpb.PendingActivityInfo{
			pending(t, "RunLoopRollouts", training.LoopWorkerStatus{Worker: 0, PerSec: 1.5}),
			pending(t, "RunLoopTrainer", training.LoopStatus{Step: 3, Loss: &loss, Checkpoint: 2, Output: "step 3"}),
			pending(t, "RunLoopRollouts", training.LoopWorkerStatus{Worker: 1, PerSec: 2}),
		}, func(t *testing.T, l Live) {
			if l.Loop == nil || l.Loop.Trainer == nil || l.Loop.Trainer.Step != 3 || len(l.Loop.Workers) != 2 ||
				l.Loop.TrajectoriesPerSec != 3.5 || l.Output != "step 3" || l.Checkpoint != 2 || l.Metrics != nil {
				t.Errorf("%+v %+v", l, l.Loop)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, LiveOf(tc.pending)) })
	}
}
