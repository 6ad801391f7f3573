package sweep

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/trainyard/trainyard/internal/temporalx"
	"github.com/trainyard/trainyard/workflows/pluginrun"
)

// Start starts a sweep's workflow (id in.SweepID) on the control queue,
// marked as using its plugins, with the memo sweep listings show.
func Start(ctx context.Context, c client.Client, in Input) (client.WorkflowRun, error) {
	opts := client.StartWorkflowOptions{
		ID: in.SweepID, TaskQueue: temporalx.ControlTaskQueue,
		Memo: map[string]any{"name": in.Spec.Name, "cluster": in.Spec.Run.Cluster, "env": in.Spec.Run.Env},
	}
	if len(in.Plugins) > 0 {
		opts.TypedSearchAttributes = pluginrun.Uses(in.Plugins)
	}
	return c.ExecuteWorkflow(ctx, opts, Name, in)
}
