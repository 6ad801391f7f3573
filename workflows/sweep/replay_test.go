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
//   - history-asha.json: a random search (4 CartPole trials, learning_rate
//     log-uniform 1e-5..3e-3, search_seed 1) under ASHA (grace 2, max_t 12:
//     rungs 2 and 6), 2 at a time, checkpoint_every 2: the trials signal
//     their metrics after every segment (trial-reports version 1); three
//     were stopped (a stop signal, then a cancel), one succeeded.
func TestReplay(t *testing.T) {
	for _, file := range []string{"testdata/history.json", "testdata/history-gpu-share.json", "testdata/history-asha.json"} {
		t.Run(file, func(t *testing.T) { replaytest.Replay(t, Workflow, Name, file) })
	}
}
