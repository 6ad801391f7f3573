package selfplay

import (
	"testing"

	"github.com/trainyard/trainyard/internal/replaytest"
)

// TestReplay fails when a change to Workflow would break executions
// recorded by the code before it. testdata/history-kill.json: a loop whose
// self-play batch lost its node to kill -9 (the activity timed out on its
// heartbeat), was placed on the other node and resumed, then was
// cancelled (stop --now); recorded by TestSelfplayKillEphemeralAgent with
// TRAINYARD_RECORD_HISTORY set.
func TestReplay(t *testing.T) {
	for _, f := range []string{"testdata/history-kill.json"} {
		t.Run(f, func(t *testing.T) { replaytest.Replay(t, Workflow, Name, f) })
	}
}
