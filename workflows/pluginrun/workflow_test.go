package pluginrun

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/trainyard/trainyard/internal/pluginhost"
)

// TestDeadWorkerCostsAHeartbeatTimeout: a test run is a control-plane
// activity of up to 10 minutes; the control worker running it may be
// killed (the production topology runs several), and its retry must come
// after a heartbeat timeout, not after the 10 minutes. The activity beats
// on its own, several times within that timeout.
func TestDeadWorkerCostsAHeartbeatTimeout(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var got time.Duration
	env.OnActivity((&Activities{}).Rollout, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, _ Input) (pluginhost.RolloutStats, error) {
			got = activity.GetInfo(ctx).HeartbeatTimeout
			return pluginhost.RolloutStats{}, nil
		})
	env.ExecuteWorkflow(Workflow, Input{Envs: 1})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if got == 0 || got > time.Minute || got < 3*beat {
		t.Fatalf("heartbeat timeout %v; want one that a dead worker costs (≤ 1 min) and that %v beats fit in 3 times", got, beat)
	}
}
