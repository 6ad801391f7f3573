package sweep

import (
	"testing"

	"github.com/trainyard/trainyard/internal/replaytest"
)

// TestReplay fails when a change to Workflow would break executions
// recorded by the code before it. Both histories were taken on
// `trainyard dev` (one local node, one declared GPU, as e2e sweepLab sets
// it up) with `trainyard sweep run` and internal/tools/recordhistory:
//   - history.json: e2e TestSweepGrid's CartPole grid, learning_rate
//     0.003,0.0003 × seed 1,2 at max_concurrent 2: four child Train runs of
//     4 iterations, all succeeded.
//   - history-gpu-share.json: two command trials with gpus_per_trial 0.5,
//     each reserving half of GPU 0 (the Allocate activity) before its
//     child Train run starts; both succeeded.
func TestReplay(t *testing.T) {
	for _, file := range []string{"testdata/history.json", "testdata/history-gpu-share.json"} {
		t.Run(file, func(t *testing.T) { replaytest.Replay(t, Workflow, Name, file) })
	}
}
