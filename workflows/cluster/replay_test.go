package cluster

import (
	"testing"

	"github.com/trainyard/trainyard/internal/replaytest"
)

// TestReplay fails when a change to Workflow would break executions
// recorded by the code before it: testdata/history.json, and
// history-v2.json, recorded with the versions allocate-takes-buffered-signals
// and ignore-cancel (a two-node cluster, six jobs, a drain and an undrain,
// a cancel request noted and ignored), and history-v3.json, recorded with
// work descriptions (a gang of four instances on two nodes placed twice,
// the second time after waiting in the queue on one training per config,
// and a one-role training job; the ledger and queue in state), and
// history-v4.json, recorded with join keys (signed heartbeats) and
// admit-in-cluster (three trainings of one config submitted at once, each
// admitted by the Admit activity in turn, and a plain job), and
// history-v5.json, recorded with placement-through-bundle (three trainings
// of one config and two plain jobs, each placement asked about by the
// AdmitPlacement activity) and undrain-ignores-stale-beats (a drain and an
// undrain of a node), and history-v6.json, recorded with liveness-leases
// (three hollow nodes, each signalling once and then holding a lease; a
// drain and an undrain; four jobs; the agents killed, their leases lost
// and the nodes Dead; new agents, the nodes back with new leases; a job),
// and history-v7.json, recorded with scheduling-cycle and ledger-folds and
// a packed state as its input (three hollow nodes; six jobs, three
// trainings of one config and a gang of three submitted together, decided
// in cycles by AdmitBatch local activities, one training and the gang
// waiting; a drain and an undrain), and history-v8.json, recorded with
// batched-agents (four hollow nodes started by one StartAgents, three
// registering, the fourth Failed after register_timeout and stopped by
// StopAgents; five jobs; down, the rest stopped in one batch), and
// history-v9.json, recorded with lease-groups (three hollow nodes whose
// leases node group 1 held; five jobs; the agents killed, their leases
// reported lost by the group and the nodes Dead; new agents, the nodes
// back; down, the leases let go before the workflow completed).
func TestReplay(t *testing.T) {
	for _, file := range []string{"testdata/history.json", "testdata/history-v2.json", "testdata/history-v3.json", "testdata/history-v4.json", "testdata/history-v5.json", "testdata/history-v6.json", "testdata/history-v7.json", "testdata/history-v8.json", "testdata/history-v9.json"} {
		replaytest.Replay(t, Workflow, Name, file)
	}
}

// TestReplayLeaseGroup: testdata/leasegroup-v1.json is a node group
// holding three leases whose agents were killed: each lease timed out,
// was reported to the cluster, and the group completed holding none.
func TestReplayLeaseGroup(t *testing.T) {
	replaytest.Replay(t, LeaseGroup, LeaseGroupName, "testdata/leasegroup-v1.json")
}
