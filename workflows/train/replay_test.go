package train

import (
	"testing"

	"github.com/trainyard/trainyard/internal/replaytest"
)

// TestReplay fails when a change to Workflow would break executions
// recorded by the code before it (testdata/history.json: a run of 24
// CartPole iterations in segments of 2, paused after its first checkpoint
// and resumed).
func TestReplay(t *testing.T) {
	replaytest.Replay(t, Workflow, Name, "testdata/history.json")
}
