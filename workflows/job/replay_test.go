package job

import (
	"testing"

	"github.com/trainyard/trainyard/internal/replaytest"
)

// TestReplay fails when a change to Workflow would break executions
// recorded by the code before it (testdata/history.json).
// history-gang.json is a job with a work description: four instances of
// three roles placed as one gang and run at once.
func TestReplay(t *testing.T) {
	for _, file := range []string{"testdata/history.json", "testdata/history-gang.json"} {
		replaytest.Replay(t, Workflow, Name, file)
	}
}
