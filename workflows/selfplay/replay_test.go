package selfplay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/trainyard/trainyard/internal/replaytest"
)

// testdata is resolved at package init: the S3 gateway TestActivities
// starts changes the working directory.
var testdata = func() string {
	d, _ := os.Getwd()
	return filepath.Join(d, "testdata")
}()

// TestReplay fails when a change to the workflows would break executions
// recorded by the code before it. The histories come from the e2e tests
// run with TRAINYARD_RECORD_HISTORY=workflows/selfplay/testdata:
//   - history.json: TestSelfplayLoop's three square8_2p generations
//     (heuristic bootstrap, then MCTS with the best model; promotions).
//   - history-kill.json: a loop whose self-play batch lost its node to
//     kill -9 (the activity timed out on its heartbeat), was placed on the
//     other node and resumed, then was cancelled (stop --now).
//   - history-scheduler.json: a scheduler giving three one-generation
//     slices to two configs as child loops.
//   - history-idle.json: the idle daemon starting a loop on a GPU idle for
//     its threshold, seeing the loop end, then stopped.
//   - history-populator.json: TestSelfplayPopulator's populator starting a
//     queued square8_2p loop, queuing its work at a 50/25/25 mix, raising
//     the queue-depth alert, then stopped.
//   - history-queued.json: that populator-driven loop running self-play,
//     training and tournament items (a promotion), stopped by the populator.
func TestReplay(t *testing.T) {
	for _, tc := range []struct {
		file, name string
		fn         any
	}{
		{"history.json", Name, Workflow},
		{"history-kill.json", Name, Workflow},
		{"history-scheduler.json", SchedulerName, Scheduler},
		{"history-idle.json", IdleName, Idle},
		{"history-populator.json", PopulatorName, Populator},
		{"history-queued.json", Name, Workflow},
	} {
		t.Run(tc.file, func(t *testing.T) { replaytest.Replay(t, tc.fn, tc.name, filepath.Join(testdata, tc.file)) })
	}
}
