package cluster

import (
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplay replays a recorded cluster life (up of three local nodes, a
// job allocated and released, a node added and removed, down) against the
// current code. Version changes with workflow.GetVersion and record a new
// history with internal/tools/recordhistory when this fails.
func TestReplay(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: Name})
	if err := r.ReplayWorkflowHistoryFromJSONFile(nil, "testdata/history.json"); err != nil {
		t.Fatal(err)
	}
}
