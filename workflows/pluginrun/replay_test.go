package pluginrun

import (
	"testing"

	"github.com/trainyard/trainyard/internal/replaytest"
)

// TestReplay fails when a change to Workflow would break executions
// recorded by the code before it (testdata/history.json: a CartPole test
// run on `trainyard dev`, 16 envs, 20000 steps, seed 7, as
// `trainyard plugin run --remote` starts it; recorded with
// internal/tools/recordhistory).
func TestReplay(t *testing.T) {
	replaytest.Replay(t, Workflow, Name, "testdata/history.json")
}
