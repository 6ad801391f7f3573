package selfplay

import (
	"context"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/trainyard/trainyard/internal/temporalx"
	"github.com/trainyard/trainyard/workflows/pluginrun"
)

// start starts one of the package's long-lived workflows: one at a time
// per id (a second start fails with "already started"; a stopped one may
// be started again), marked as using its plugins, the cluster in its memo.
func start(ctx context.Context, c client.Client, id, cluster string, plugins []string, memo map[string]any, name string, in any) (client.WorkflowRun, error) {
	if memo == nil {
		memo = map[string]any{}
	}
	memo["cluster"] = cluster
	return c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: temporalx.ControlTaskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    pluginrun.Uses(plugins),
		Memo:                                     memo,
	}, name, in)
}

// StartLoop starts a config's self-play loop (WorkflowID).
func StartLoop(ctx context.Context, c client.Client, in Input) (client.WorkflowRun, error) {
	return start(ctx, c, WorkflowID(in.Cluster, in.Config), in.Cluster, []string{in.GamePlugin}, map[string]any{"config": in.Config}, Name, in)
}

// StartScheduler starts a cluster's self-play scheduler (SchedulerID).
func StartScheduler(ctx context.Context, c client.Client, in SchedulerInput, plugins []string) (client.WorkflowRun, error) {
	return start(ctx, c, SchedulerID(in.Cluster), in.Cluster, plugins, nil, SchedulerName, in)
}

// StartIdle starts a cluster's idle-resource daemon (IdleID).
func StartIdle(ctx context.Context, c client.Client, in IdleInput, plugins []string) (client.WorkflowRun, error) {
	return start(ctx, c, IdleID(in.Cluster), in.Cluster, plugins, nil, IdleName, in)
}

// StartPopulator starts a cluster's queue populator (PopulatorID).
func StartPopulator(ctx context.Context, c client.Client, in PopulatorInput, plugins []string) (client.WorkflowRun, error) {
	return start(ctx, c, PopulatorID(in.Cluster), in.Cluster, plugins, nil, PopulatorName, in)
}
