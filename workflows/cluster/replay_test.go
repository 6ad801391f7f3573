package cluster

import (
	"testing"

	"github.com/trainyard/trainyard/internal/replaytest"
)

// TestReplay fails when a change to Workflow would break executions
// recorded by the code before it: testdata/history.json, and
// history-v2.json, recorded with the versions allocate-takes-buffered-signals
// and ignore-cancel (a two-node cluster, six jobs, a drain and an undrain,
// a cancel request noted and ignored).
func TestReplay(t *testing.T) {
	for _, file := range []string{"testdata/history.json", "testdata/history-v2.json"} {
		replaytest.Replay(t, Workflow, Name, file)
	}
}
