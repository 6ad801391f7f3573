// Package pluginrun runs an uploaded env plugin with random actions on a
// worker: the "does it run here, and how fast" check behind
// `POST /v1/plugins/{id}/test-runs`.
package pluginrun

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/temporalx"
)

// Name is the workflow type.
const Name = "PluginTestRun"

// SearchAttribute lists the plugins a workflow uses, so that deleting a
// plugin that running work needs can be refused.
var SearchAttribute = temporal.NewSearchAttributeKeyKeywordList("TrainyardPlugins")

// Input says what to run.
type Input struct {
	PluginID string `json:"plugin_id"`
	Envs     int    `json:"envs"`
	Steps    int    `json:"steps"`
	Seed     uint64 `json:"seed"`
}

// beat is how often a test run heartbeats.
const beat = 5 * time.Second

// Workflow runs one rollout activity; a plugin that traps or times out is
// not retried, since it would fail the same way again.
func Workflow(ctx workflow.Context, in Input) (pluginhost.RolloutStats, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		// A control worker killed mid-run costs one heartbeat timeout.
		HeartbeatTimeout: 6 * beat,
		RetryPolicy: &temporal.RetryPolicy{
			MaximumAttempts:        3,
			NonRetryableErrorTypes: []string{ErrPluginFailed},
		},
	})
	var st pluginhost.RolloutStats
	err := workflow.ExecuteActivity(ctx, (*Activities).Rollout, in).Get(ctx, &st)
	return st, err
}

// Uses marks a workflow as using plugins (their sha256s): deleting one of
// them is refused while it runs.
func Uses(plugins []string) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(SearchAttribute.ValueSet(plugins))
}

// Start starts a test run of an env plugin under id on the control queue.
func Start(ctx context.Context, c client.Client, id string, in Input) (client.WorkflowRun, error) {
	return c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: temporalx.ControlTaskQueue, TypedSearchAttributes: Uses([]string{in.PluginID})}, Name, in)
}
