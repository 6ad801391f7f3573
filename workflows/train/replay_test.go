package train

import (
	"testing"

	"github.com/trainyard/trainyard/internal/replaytest"
)

// TestReplay fails when a change to Workflow would break executions
// recorded by the code before it:
//   - history.json: a run of 24 CartPole iterations in segments of 2,
//     paused after its first checkpoint and resumed;
//   - history-stopped.json: a sweep trial (report_progress) that signalled
//     its parent after each segment and was stopped by ASHA at rung 6 (a
//     stop signal with the reason, then cancellation): it ends stopped.
func TestReplay(t *testing.T) {
	for _, file := range []string{"testdata/history.json", "testdata/history-stopped.json"} {
		t.Run(file, func(t *testing.T) { replaytest.Replay(t, Workflow, Name, file) })
	}
}
