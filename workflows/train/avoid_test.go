package train

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/job"
)

// TestRunAvoidsTheNodeItLeft: a run drained off a node, or whose segment
// was lost there, is placed on another node next even while the cluster
// still offers the node it left (a drain shows with the agent's next beat,
// a killed agent looks alive until its beats stop; CI once saw a run put
// back on the node it had just drained off). With no other node, the one
// it left is better than waiting.
func TestRunAvoidsTheNodeItLeft(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nodes     []string
		first     func() (training.SegmentResult, error)
		wantNodes []string // nodes of the segments, in order
		drains    int
		failures  int
	}{
		{"drained, another node free", []string{"n1", "n2"},
			func() (training.SegmentResult, error) {
				return training.SegmentResult{Drained: "preemption notice", Iteration: 3, Checkpoint: 1, Metrics: metricsUpTo(1, 3)}, nil
			}, []string{"n1", "n2"}, 1, 0},
		{"lost, another node free", []string{"n1", "n2"},
			func() (training.SegmentResult, error) {
				return training.SegmentResult{}, errors.New("activity Heartbeat timeout")
			}, []string{"n1", "n2"}, 0, 1},
		{"drained, no other node", []string{"n1"},
			func() (training.SegmentResult, error) {
				return training.SegmentResult{Drained: "drain requested", Iteration: 3, Checkpoint: 1, Metrics: metricsUpTo(1, 3)}, nil
			}, []string{"n1", "n1"}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, jobActs, agentActs := newTestEnv()
			// The cluster never learns of the drain or the death: it
			// offers its nodes in order, all of them always live.
			var placed string
			env.OnActivity(jobActs.Allocate, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in job.AllocateInput) (cluster.Allocation, error) {
					for _, n := range tc.nodes {
						if !slices.Contains(in.Request.Exclude, n) {
							placed = n
							return cluster.Allocation{Node: n, Queue: n}, nil
						}
					}
					return cluster.Allocation{}, temporal.NewApplicationError("no node can take the job now", cluster.ErrNoCapacity)
				})
			env.OnSignalExternalWorkflow(mock.Anything, cluster.WorkflowID("lab"), "", cluster.SignalRelease, mock.Anything).Return(nil)
			var segNodes []string
			env.OnActivity(agentActs.RunSegment, mock.Anything, mock.Anything).Return(
				func(context.Context, training.SegmentInput) (training.SegmentResult, error) {
					segNodes = append(segNodes, placed)
					if len(segNodes) == 1 {
						return tc.first()
					}
					return training.SegmentResult{Iteration: 6, Checkpoint: 2, Metrics: metricsUpTo(4, 6), Done: true}, nil
				})
			spec := training.Spec{Cluster: "lab", Env: "CartPole-v1", Iterations: 6, CheckpointEvery: 3}
			env.ExecuteWorkflow(Name, Input{RunID: "run-x", Spec: spec, EnvPlugin: "sha"})
			var p RunProgress
			if err := env.GetWorkflowResult(&p); err != nil {
				t.Fatal(err)
			}
			if p.State != "succeeded" || !slices.Equal(segNodes, tc.wantNodes) || p.Drains != tc.drains || p.Failures != tc.failures {
				t.Fatalf("segments ran on %v (want %v); state %s, drains %d, failures %d: %s",
					segNodes, tc.wantNodes, p.State, p.Drains, p.Failures, p.Reason)
			}
		})
	}
}

func metricsUpTo(from, to int64) []learner.Metrics {
	var ms []learner.Metrics
	for i := from; i <= to; i++ {
		ms = append(ms, learner.Metrics{Iteration: i})
	}
	return ms
}
