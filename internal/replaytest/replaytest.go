// Package replaytest replays a recorded workflow history against the
// current workflow code: the guard every long-lived workflow keeps so that
// a change which would break running executions fails a test instead.
// Record histories with internal/tools/recordhistory; version incompatible
// changes with workflow.GetVersion.
package replaytest

import (
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Replay replays the JSON history in file against fn registered as name.
func Replay(t *testing.T, fn any, name, file string) {
	t.Helper()
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: name})
	if err := r.ReplayWorkflowHistoryFromJSONFile(nil, file); err != nil {
		t.Fatalf("replay %s against %s: %v", file, name, err)
	}
}
