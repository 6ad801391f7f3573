package train

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/ppo"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/job"
)

// fakeCluster places jobs on n1..n3, one per node while they last, and
// never on a dead node.
type fakeCluster struct {
	mu          sync.Mutex
	dead        map[string]bool
	held        map[string]string // job → node
	released    []string
	starts      map[int]int // worker → RunRollouts calls
	trainerDone bool
}

func (c *fakeCluster) allocate(_ context.Context, in job.AllocateInput) (cluster.Allocation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.held[in.Request.JobID]; ok {
		return cluster.Allocation{Node: n, Queue: n}, nil
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if c.dead[n] || slices.Contains(in.Request.Exclude, n) {
			continue
		}
		c.held[in.Request.JobID] = n
		return cluster.Allocation{Node: n, Queue: n}, nil
	}
	return cluster.Allocation{}, temporal.NewApplicationError("no node can take the job now", cluster.ErrNoCapacity)
}

// newTestEnv is a test environment with the run workflow and the
// activities it calls registered.
func newTestEnv() (*testsuite.TestWorkflowEnvironment, *job.Activities, *AgentActivities) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: Name})
	jobActs, agentActs := &job.Activities{}, &AgentActivities{}
	env.RegisterActivity(jobActs)
	env.RegisterActivity(agentActs)
	return env, jobActs, agentActs
}

// TestDistributedRunReplacesLostRolloutWorker: a run with two rollout
// workers holds three allocations on three nodes; worker 0's node dies
// (its activity fails), the slot is given back and the worker placed again
// on a live node while the trainer goes on; the run then succeeds and
// every allocation is given back.
func TestDistributedRunReplacesLostRolloutWorker(t *testing.T) {
	env, jobActs, agentActs := newTestEnv()
	c := &fakeCluster{dead: map[string]bool{}, held: map[string]string{}, starts: map[int]int{}}
	env.OnActivity(jobActs.Allocate, mock.Anything, mock.Anything).Return(c.allocate)
	env.OnSignalExternalWorkflow(mock.Anything, cluster.WorkflowID("lab"), "", cluster.SignalRelease, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			r := arg.(cluster.Release)
			c.released = append(c.released, r.JobID)
			delete(c.held, r.JobID)
			return nil
		})
	env.OnActivity(agentActs.RunRollouts, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in training.RolloutInput) (training.RolloutStatus, error) {
			c.mu.Lock()
			c.starts[in.Worker]++
			first := in.Worker == 0 && c.starts[0] == 1
			if first {
				c.dead[c.held[rolloutJobID(in.RunID, 0)]] = true
			}
			c.mu.Unlock()
			if first {
				return training.RolloutStatus{}, errors.New("activity Heartbeat timeout")
			}
			for {
				c.mu.Lock()
				done := c.trainerDone
				c.mu.Unlock()
				if done || ctx.Err() != nil {
					return training.RolloutStatus{Worker: in.Worker}, ctx.Err()
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	segs := 0
	env.OnActivity(agentActs.RunDistributedSegment, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in training.SegmentInput) (training.SegmentResult, error) {
			segs++
			if segs == 2 { // the trainer waits for the replacement's fragment
				deadline := time.Now().Add(20 * time.Second)
				for {
					c.mu.Lock()
					n := c.starts[0]
					c.mu.Unlock()
					if n >= 2 || time.Now().After(deadline) {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			it := int64(2 * segs)
			ms := []learner.Metrics{{Iteration: it - 1}, {Iteration: it, Rollouts: []ppo.RolloutInfo{{Worker: 0, WeightVersion: it - 1}, {Worker: 1, WeightVersion: it - 1}}}}
			res := training.SegmentResult{Metrics: ms, Iteration: it, Checkpoint: int64(segs), Done: segs == 3}
			if res.Done {
				c.mu.Lock()
				c.trainerDone = true
				c.mu.Unlock()
			}
			return res, nil
		})
	spec := training.Spec{Cluster: "lab", Env: "CartPole-v1", Iterations: 6, CheckpointEvery: 2, RolloutWorkers: 2}
	env.ExecuteWorkflow(Name, Input{RunID: "run-x", Spec: spec, EnvPlugin: "sha"})
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var p RunProgress
	if err := env.GetWorkflowResult(&p); err != nil {
		t.Fatal(err)
	}
	if p.State != "succeeded" || p.Iteration != 6 || len(p.Metrics) != 6 || len(p.RolloutWorkers) != 2 {
		t.Fatalf("progress: %+v", p)
	}
	w0, w1 := p.RolloutWorkers[0], p.RolloutWorkers[1]
	if w0.Failures != 1 || w0.Placements != 2 || w1.Failures != 0 || w1.Placements != 1 || p.Failures != 0 || p.Placements != 1 {
		t.Fatalf("rollout workers: %+v (trainer failures %d, placements %d)", p.RolloutWorkers, p.Failures, p.Placements)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held) != 0 {
		t.Fatalf("allocations not given back: %v (released %v)", c.held, c.released)
	}
	if c.starts[0] != 2 || c.starts[1] != 1 {
		t.Fatalf("rollout starts: %v", c.starts)
	}
}
