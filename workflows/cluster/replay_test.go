package cluster

import (
	"testing"

	"github.com/trainyard/trainyard/internal/replaytest"
)

// TestReplay fails when a change to Workflow would break executions
// recorded by the code before it (testdata/history.json).
func TestReplay(t *testing.T) {
	replaytest.Replay(t, Workflow, Name, "testdata/history.json")
}
