package healthcheck

import (
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplay fails when a change to Workflow would break histories recorded
// by the code before it (record a new one with internal/tools/recordhistory
// after versioning the change with workflow.GetVersion).
func TestReplay(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: Name})
	if err := r.ReplayWorkflowHistoryFromJSONFile(nil, "testdata/history.json"); err != nil {
		t.Fatal(err)
	}
}
