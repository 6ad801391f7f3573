package job

import (
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplay replays a recorded job (allocated, run on a node, released)
// against the current code. Version changes with workflow.GetVersion and record a new
// history with internal/tools/recordhistory when this fails.
func TestReplay(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: Name})
	if err := r.ReplayWorkflowHistoryFromJSONFile(nil, "testdata/history.json"); err != nil {
		t.Fatal(err)
	}
}
