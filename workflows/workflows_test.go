package workflows_test

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/trainyard/trainyard/internal/embedded/temporaltest"
	"github.com/trainyard/trainyard/workflows"
	"github.com/trainyard/trainyard/workflows/cluster"
)

// Every workflow package names its function Workflow, and the SDK turns a
// function into its short name, so a workflow that continues as new must
// name its type. This runs the cluster workflow on a worker registered the
// way the real one is, on a real Temporal server, past its history limit.
func TestClusterContinuesAsNewAsACluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tc := temporaltest.Start(t, nil)
	w := worker.New(tc, workflows.ControlTaskQueue, worker.Options{})
	workflows.Register(w, workflows.Deps{Client: tc})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// A health tick every 100 ms adds ~5 events; 30 events is a few ticks.
	id := cluster.WorkflowID("lab")
	first, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.ControlTaskQueue},
		cluster.Name, cluster.State{Name: "lab", Settings: cluster.Settings{HeartbeatTimeout: 300 * time.Millisecond, HistoryLimit: 30}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tc.TerminateWorkflow(context.Background(), id, "", "test done") }()

	for {
		d, err := tc.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		info := d.GetWorkflowExecutionInfo()
		if info.GetExecution().GetRunId() == first.GetRunID() {
			if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				t.Fatalf("first run is %s, want it running until it continues as new", info.GetStatus())
			}
			select {
			case <-ctx.Done():
				t.Fatal("the cluster workflow never continued as new")
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if got := info.GetType().GetName(); got != cluster.Name {
			t.Fatalf("continued as a %q workflow (status %s), want %q", got, info.GetStatus(), cluster.Name)
		}
		if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING &&
			info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
			t.Fatalf("new run is %s", info.GetStatus())
		}
		break
	}
	// The state went with it.
	v, err := tc.QueryWorkflow(ctx, id, "", cluster.QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st cluster.Status
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	if st.Cluster != "lab" {
		t.Fatalf("status after continue-as-new names cluster %q, want lab", st.Cluster)
	}
}
