package cluster

import (
	"testing"

	"github.com/trainyard/trainyard/internal/replaytest"
)

// TestReplay fails when a change to Workflow would break executions
// recorded by the code before it: testdata/history.json, and
// history-allocate-buffered.json, recorded after the allocate update began
// taking buffered signals (a two-node cluster, five jobs, a drain and an
// undrain).
func TestReplay(t *testing.T) {
	for _, file := range []string{"testdata/history.json", "testdata/history-allocate-buffered.json"} {
		replaytest.Replay(t, Workflow, Name, file)
	}
}
