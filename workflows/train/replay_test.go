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
//     stop signal with the reason, then cancellation): it ends stopped;
//   - history-distributed-v0.json: a distributed run (2 rollout workers,
//     3 nodes, 6 iterations) from before the gang: the trainer and each
//     worker placed one by one;
//   - history-distributed.json: the same run placed as one gang
//     (version distributed-gang);
//   - history-gang.json: a 2-rank command run (--nodes 2, a gloo
//     all-reduce) on 3 local nodes whose rank 1's agent was killed: rank
//     0 exited, the lost rank showed within the grace window, and the
//     gang was placed again away from the dead node and finished;
//   - history-llm.json: a kind llm loop (2 rollout workers, 4 local
//     nodes, 80 steps) paused at step 29 (the trainer published its last
//     whole step and returned its state with the cancellation), resumed,
//     and a rollout worker's agent killed: the worker was placed again
//     off that node.
func TestReplay(t *testing.T) {
	for _, file := range []string{"testdata/history.json", "testdata/history-stopped.json",
		"testdata/history-distributed-v0.json", "testdata/history-distributed.json", "testdata/history-gang.json",
		"testdata/history-llm.json"} {
		t.Run(file, func(t *testing.T) { replaytest.Replay(t, Workflow, Name, file) })
	}
}
