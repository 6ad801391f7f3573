package job

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/trainyard/trainyard/internal/temporalx"
)

// Start starts a job's workflow under id on the control queue; its memo
// names the cluster (the cluster's queue view lists it) and, for a work
// description, its name.
func Start(ctx context.Context, c client.Client, id string, in Input) (client.WorkflowRun, error) {
	memo := map[string]any{"cluster": in.Cluster}
	if in.Work != nil {
		memo["name"] = in.Work.Name
	}
	return c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: temporalx.ControlTaskQueue, Memo: memo}, Name, in)
}
