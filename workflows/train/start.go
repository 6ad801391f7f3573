package train

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/trainyard/trainyard/internal/temporalx"
	"github.com/trainyard/trainyard/workflows/pluginrun"
)

// Start starts a run's workflow (id in.RunID) on the control queue; plugins
// are the sha256s it uses (a plugin in use cannot be deleted), and its memo
// holds the name, cluster and env that run listings show.
func Start(ctx context.Context, c client.Client, in Input, plugins []string) (client.WorkflowRun, error) {
	return c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: in.RunID, TaskQueue: temporalx.ControlTaskQueue,
		TypedSearchAttributes: pluginrun.Uses(plugins),
		Memo:                  map[string]any{"name": in.Spec.Name, "cluster": in.Spec.Cluster, "env": in.Spec.Env},
	}, Name, in)
}
