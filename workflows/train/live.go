package train

import (
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/training"
)

// Live is what a run's activities in flight last reported in their
// heartbeats. The run's progress query cannot say it (heartbeats reach
// Temporal, not the workflow), so readers describe the workflow and have
// its pending activities decoded here, beside the activities that send
// them.
type Live struct {
	// Metrics is the built-in learner's newest iteration, newer than the
	// progress query's between checkpoints.
	Metrics *learner.Metrics
	// Output is a command trainer's recent output (rank 0's of a gang), or
	// the LLM loop trainer's.
	Output string
	// Checkpoint is the newest checkpoint synced while the trainer runs.
	Checkpoint int64
	// Loop is set for an LLM loop (kind llm).
	Loop *LoopLive
	// Waiting says what an activity in flight waits on (S3 not answering),
	// the second value of its heartbeat (beating).
	Waiting string
}

// LoopLive is a running loop's state as its activities last reported it.
type LoopLive struct {
	Trainer *training.LoopStatus        `json:"trainer,omitempty"`
	Workers []training.LoopWorkerStatus `json:"workers"`
	// TrajectoriesPerSec sums the workers' rates.
	TrajectoriesPerSec float64 `json:"trajectories_per_sec"`
}

// LiveOf decodes the heartbeats of a run's pending activities.
func LiveOf(pending []*workflowpb.PendingActivityInfo) Live {
	var l Live
	rank := -1
	dc := converter.GetDefaultDataConverter()
	for _, pa := range pending {
		details := pa.GetHeartbeatDetails()
		if details == nil {
			continue
		}
		if ps := details.GetPayloads(); len(ps) > 1 {
			var why string
			if dc.FromPayload(ps[1], &why) == nil && why != "" {
				l.Waiting = why
			}
		}
		if l.loop(pa.GetActivityType().GetName(), details) {
			continue
		}
		var m learner.Metrics
		if err := dc.FromPayloads(details, &m); err == nil && m.Iteration > 0 {
			l.Metrics = &m
		}
		var cs training.CommandStatus
		if err := dc.FromPayloads(details, &cs); err == nil && cs.Output != "" && (rank < 0 || cs.Rank < rank) {
			l.Output, rank = cs.Output, cs.Rank
			l.Checkpoint = max(l.Checkpoint, cs.Checkpoint)
		}
	}
	return l
}

// loop takes the LLM loop's heartbeats (trainer and rollout workers).
func (l *Live) loop(activity string, details *commonpb.Payloads) bool {
	if activity != "RunLoopTrainer" && activity != "RunLoopRollouts" {
		return false
	}
	if l.Loop == nil {
		l.Loop = &LoopLive{Workers: []training.LoopWorkerStatus{}}
	}
	dc := converter.GetDefaultDataConverter()
	switch activity {
	case "RunLoopTrainer":
		var st training.LoopStatus
		if dc.FromPayloads(details, &st) == nil {
			l.Loop.Trainer = &st
			l.Output = st.Output
			l.Checkpoint = max(l.Checkpoint, st.Checkpoint)
		}
	case "RunLoopRollouts":
		var w training.LoopWorkerStatus
		if dc.FromPayloads(details, &w) == nil {
			l.Loop.Workers = append(l.Loop.Workers, w)
			l.Loop.TrajectoriesPerSec += w.PerSec
		}
	}
	return true
}
