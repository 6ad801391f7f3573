package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/ledger"
	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/provision"
	"github.com/trainyard/trainyard/internal/resources"
	"github.com/trainyard/trainyard/internal/workspec"
)

// fleetState is a cluster of nodes, each running four jobs, with queued
// jobs waiting and the ledger full, as a 1,000-node fleet carries it
// across continue-as-new.
func fleetState(nodes, queued int) State {
	now := time.Unix(1_800_000_000, 0).UTC()
	st := State{Name: "fleet", Desired: "up", Settings: Settings{}.withDefaults(), Nodes: map[string]*nodeState{}, Queue: map[string]*waiting{}}
	for i := range nodes {
		name := fmt.Sprintf("gpu-%04d", i)
		capacity := resources.Capacity{CPUs: 64, MemoryMB: 512000, GPUs: []resources.GPU{{Index: 0, Model: "NVIDIA H100 80GB HBM3", VRAMMB: 81559}, {Index: 1, Model: "NVIDIA H100 80GB HBM3", VRAMMB: 81559}}}
		n := &nodeState{
			Spec:   spec.Node{Name: name, Address: fmt.Sprintf("198.18.%d.%d", i/250, i%250+1), Provider: "nebius", Labels: map[string]string{"zone": "eu-north1-a", "pool": "train"}, Resources: capacity, Provisioner: spec.Provisioner{Kind: "static"}},
			Handle: provision.Handle{Node: name, Kind: "static"}, Health: Healthy, Reported: capacity, Address: fmt.Sprintf("198.18.%d.%d:7070", i/250, i%250+1),
			GPUUtil: []int{87, 91}, LastBeat: now, AgentID: fmt.Sprintf("%s/%d", name, 4242), AgentPID: 4242, LastSeq: 123456, Allocated: map[string]Usage{},
		}
		for j := range 4 {
			id := uuidLike(i*4 + j)
			n.Allocated[id] = Usage{CPUs: 8, MemoryMB: 32000, GPUs: []int{j / 2}, GPUShare: 0.5, Work: id, Role: "job",
				Labels: map[string]string{"work": id, "role": "job", "kind": "job", "config": "hexagonal_4p"}}
		}
		st.Order = append(st.Order, name)
		st.Nodes[name] = n
	}
	for i := range queued {
		id := uuidLike(1_000_000 + i)
		w := workspec.Spec{Name: id, Kind: workspec.KindJob, Config: "hexagonal_4p", Priority: i % 3,
			Roles: []workspec.Role{{Name: "job", Count: 1, CPUs: 8, GPUs: 0.5, MemoryMB: 32000,
				Command: []string{"python3", "-m", "train", "--config", "hexagonal_4p", "--steps", "1000000", "--checkpoint", "s3://trainyard/checkpoints/" + id}}}}
		st.Queue[id] = &waiting{Work: w, Since: now, Seen: now, Reason: "job#0 fits no node: gpu: needs 0.5 GPUs (>= 0 MB VRAM); node has 2 eligible, 0 reserved for inference, 0 too small; eligible GPUs are busy (1000 nodes)"}
	}
	for i := range ledger.MaxRecords {
		st.Ledger.Records = append(st.Ledger.Records, ledger.Entry{WorkID: uuidLike(2_000_000 + i), Config: "hexagonal_4p", Kind: "job", Role: "job",
			Node: fmt.Sprintf("gpu-%04d", i%max(nodes, 1)), Provider: "nebius", NodeVRAMMB: 163118, GPUs: 0.5, Start: now.Add(-time.Hour), End: now})
	}
	return st
}

// uuidLike is a job id as the API makes them, as random as theirs (ids
// that count up would compress better than real ones).
func uuidLike(i int) string {
	h := sha256.Sum256([]byte(fmt.Sprint(i)))
	x := hex.EncodeToString(h[:16])
	return "job-" + x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// TestStateSizeAtScale measures what a 1,000-node cluster with 10,000 jobs
// queued carries across continue-as-new and answers a status query with,
// against Temporal's 2 MB payload limit (its default
// limit.blobSize.error; the warning is at 512 KB). Run with -v for the
// sizes; docs/scheduling.md quotes them.
func TestStateSizeAtScale(t *testing.T) {
	dc := converter.GetDefaultDataConverter()
	// The limits: Temporal's warning threshold (512 KB) for 1,000 nodes,
	// half its 2 MB limit with 10,000 queued.
	for _, tc := range []struct {
		nodes, queued, limit int
	}{{100, 1000, 256_000}, {1000, 0, 512_000}, {1000, 10000, 1_000_000}} {
		st := fleetState(tc.nodes, tc.queued)
		c := &controller{st: &st, cycle: &cycle{}, params: params.Default()}
		state, err := dc.ToPayload(st)
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := json.Marshal(plainState(st))
		status := c.status(time.Unix(1_800_000_000, 0))
		packed, err := pack(status)
		if err != nil {
			t.Fatal(err)
		}
		plainStatus, _ := json.Marshal(status)
		t.Logf("%d nodes, %d queued (ledger %d records): continue-as-new state %d KB packed (%d KB of JSON), status %d KB packed (%d KB)",
			tc.nodes, tc.queued, len(st.Ledger.Records), len(state.Data)/1000, len(plain)/1000, len(packed.Gzip)/1000, len(plainStatus)/1000)
		if len(state.Data) > tc.limit || len(packed.Gzip) > tc.limit {
			t.Errorf("%d nodes, %d queued: state %d B, status %d B packed; want each under %d B", tc.nodes, tc.queued, len(state.Data), len(packed.Gzip), tc.limit)
		}
		var back State
		if err := dc.FromPayload(state, &back); err != nil || len(back.Nodes) != tc.nodes || len(back.Queue) != tc.queued {
			t.Fatalf("state back: %d nodes, %d queued, %v", len(back.Nodes), len(back.Queue), err)
		}
	}
}
