package policy

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/resources"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/workspec"
)

const policiesDir = "../../policies"

func loadEngine(t testing.TB) *Engine {
	t.Helper()
	b, err := LoadDir(policiesDir)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestRegoUnitTests runs every Rego test in policies/ through OPA's tester,
// the same tests `make policy-test` runs with the real CLI.
func TestRegoUnitTests(t *testing.T) {
	b, err := LoadDir(policiesDir)
	if err != nil {
		t.Fatal(err)
	}
	results, err := RunTests(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, r := range results {
		if !r.Pass {
			t.Errorf("%s.%s (%s) failed: %s", r.Package, r.Name, r.Location, r.Error)
		}
		files[strings.SplitN(r.Location, ":", 2)[0]] = true
	}
	// Every policy file has its own test file.
	for p := range b.Modules {
		if IsTest(p) || p == "admission.rego" {
			continue
		}
		if !files[strings.TrimSuffix(p, ".rego")+"_test.rego"] {
			t.Errorf("policy %s has no passing tests in %s_test.rego", p, strings.TrimSuffix(p, ".rego"))
		}
	}
	if len(results) < 30 {
		t.Errorf("%d Rego tests ran, want the full suite", len(results))
	}
}

func TestRunTestsReportsFailuresAndErrors(t *testing.T) {
	b, err := LoadDir(policiesDir)
	if err != nil {
		t.Fatal(err)
	}
	// A proposal that lowers the capacity share breaks the seed-000 test.
	b.Data = withParam(t, b.Data, "capacity_share", 0.5)
	results, err := RunTests(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, r := range results {
		if !r.Pass {
			failed[r.Name] = true
		}
	}
	if !failed["test_request_share_table"] {
		t.Errorf("failed = %v, want test_request_share_table to fail at 50%%", failed)
	}
	b.Modules["broken.rego"] = "package trainyard.admission\nallow if {"
	if _, err := RunTests(context.Background(), b); err == nil {
		t.Error("a module that does not parse gave no error")
	}
}

// withParam copies data with trainyard.params[key] = v.
// loadPreservingEngine loads the shipped bundle with seed 000's GPU
// preservation on: one GPU per node (all six g5 GPUs there) kept for LLM
// inference, rollout workers and self-play CPU-only.
func loadPreservingEngine(t testing.TB) *Engine {
	t.Helper()
	b, err := LoadDir(policiesDir)
	if err != nil {
		t.Fatal(err)
	}
	b.Data = withParam(t, b.Data, "gpu_preservation", map[string]any{"enabled": true, "reserved_per_node": 1, "cpu_only_roles": []string{"rollout_worker", "selfplay"}})
	e, err := New(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func withParam(t testing.TB, data map[string]any, key string, v any) map[string]any {
	t.Helper()
	d, err := roundTrip(data)
	if err != nil {
		t.Fatal(err)
	}
	d["trainyard"].(map[string]any)["params"].(map[string]any)[key] = v
	return d
}

func fleetNode(name, provider string, ephemeral bool, cpus float64, memGB int64, vramMB ...int) scheduler.Node {
	n := scheduler.Node{Name: name, Provider: provider, Ephemeral: ephemeral, Capacity: resources.Capacity{CPUs: cpus, MemoryMB: memGB * 1000}}
	for i, v := range vramMB {
		n.Capacity.GPUs = append(n.Capacity.GPUs, resources.GPU{Index: i, VRAMMB: v})
	}
	return n
}

func repeat(n, vram int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = vram
	}
	return out
}

// seed002Fleet is the seed-002 inventory's GPU nodes by tier.
func seed002Fleet() []scheduler.Node {
	return []scheduler.Node{
		fleetNode("runpod-h100", "runpod", false, 32, 256, 81559),
		fleetNode("runpod-a100-1", "runpod", false, 32, 256, 81920),
		fleetNode("runpod-a100-2", "runpod", false, 32, 256, 81920),
		fleetNode("vast-29129529", "vast", true, 64, 512, repeat(8, 24564)...),
		fleetNode("vast-29118471", "vast", true, 64, 512, repeat(8, 24576)...),
		fleetNode("vast-29128352", "vast", true, 32, 128, 32607, 32607),
		fleetNode("vast-28925166", "vast", true, 16, 64, 32607),
		fleetNode("vast-29128356", "vast", true, 16, 64, 32607),
		fleetNode("runpod-l40s-2", "runpod", false, 16, 128, 46068),
		fleetNode("nebius-backbone-1", "nebius", false, 16, 128, 46068),
		fleetNode("vast-28918742", "vast", true, 16, 64, 46068),
		fleetNode("vast-29031159", "vast", true, 8, 32, 16303),
		fleetNode("vast-29126088", "vast", true, 8, 32, 16380),
		fleetNode("vast-29031161", "vast", true, 8, 32, 12288),
		fleetNode("vast-28890015", "vast", true, 8, 32, 11264),
		fleetNode("vast-28889766", "vast", true, 8, 32, 8192),
		fleetNode("vast-29046315", "vast", true, 8, 32, 8192),
		fleetNode("vultr-a100-20gb", "vultr", false, 8, 64, 20480),
	}
}

func TestSeed002TierClassification(t *testing.T) {
	p := params.Default()
	want := map[string]int{
		"runpod-h100": 1, "runpod-a100-1": 1, "runpod-a100-2": 1, "vast-29129529": 1, "vast-29118471": 1,
		"vast-29128352": 2, "vast-28925166": 2, "vast-29128356": 2, "runpod-l40s-2": 2, "nebius-backbone-1": 2, "vast-28918742": 2,
		"vast-29031159": 3, "vast-29126088": 3, "vast-29031161": 3, "vast-28890015": 3, "vast-28889766": 3, "vast-29046315": 3, "vultr-a100-20gb": 3,
	}
	for _, n := range seed002Fleet() {
		if got := tierOf(p, n); got != want[n.Name] {
			t.Errorf("%s: tier %d, want %d (seed 002)", n.Name, got, want[n.Name])
		}
	}
}

// TestSeed002QuotaDeniesHexagonal4p: hexagonal_4p training keeps being
// admitted until its Tier-1 GPU time in the last 24 h passes 25%, then it
// is denied with the quota named; other configs are unaffected.
func TestSeed002QuotaDeniesHexagonal4p(t *testing.T) {
	e := loadEngine(t)
	ctx := context.Background()
	p := e.Params()
	fleet := seed002Fleet()
	now := time.Date(2025, 12, 26, 12, 0, 0, 0, time.UTC)
	// 19 Tier-1 GPUs (3 single + 2×8) over 24 h = 456 GPU-hours.
	job := func(config string) workspec.Spec {
		return workspec.Spec{Name: "j", Kind: workspec.KindSelfPlay, Config: config, Roles: []workspec.Role{{Name: "selfplay", Count: 1, CPUs: 4, GPUs: 1, MemoryMB: 16000}}}
	}
	var records []UsageRecord
	// Each finished job held all eight GPUs of vast-29129529 for 3 h:
	// 24 GPU-hours, 5.26% of the window's Tier-1 time.
	tests := []struct {
		jobsDone int
		allow    bool
	}{{0, true}, {2, true}, {4, true}, {5, false}, {6, false}}
	done := 0
	for _, tt := range tests {
		for ; done < tt.jobsDone; done++ {
			start := now.Add(-time.Duration(3*(done+1)) * time.Hour)
			records = append(records, UsageRecord{WorkID: fmt.Sprint("h", done), Config: "hexagonal_4p", Kind: "selfplay", Node: "vast-29129529", GPUs: 8, Start: start, End: start.Add(3 * time.Hour)})
		}
		usage := AggregateUsage(p, fleet, records, now)
		if usage.Tier1CapacitySeconds != 19*86400 {
			t.Fatalf("Tier-1 capacity %v s, want 19 GPUs × 24 h", usage.Tier1CapacitySeconds)
		}
		d, err := e.Decide(ctx, Input{Work: WorkInput("hex", job("hexagonal_4p"), 0), Cluster: ClusterInput(fleet), Usage: usage})
		if err != nil {
			t.Fatal(err)
		}
		share := usage.Tier1GPUSecondsByConfig["hexagonal_4p"] / usage.Tier1CapacitySeconds
		if d.Allow != tt.allow {
			t.Fatalf("after %d jobs (%.1f%% of Tier-1): allow=%v, want %v: %s", tt.jobsDone, share*100, d.Allow, tt.allow, d.Summary())
		}
		if !tt.allow {
			if len(d.Violations) != 1 || d.Violations[0].Rule != "config_quota" || !strings.Contains(d.Violations[0].Reason, "its quota is 25%") {
				t.Errorf("violations %+v, want only the hexagonal_4p quota", d.Violations)
			}
			other, err := e.Decide(ctx, Input{Work: WorkInput("sq", job("square19_2p"), 0), Cluster: ClusterInput(fleet), Usage: usage})
			if err != nil || !other.Allow {
				t.Errorf("square19_2p denied by hexagonal_4p's usage: %v %s", err, other.Summary())
			}
		}
	}
	// Usage older than the window no longer counts.
	usage := AggregateUsage(p, fleet, records, now.Add(48*time.Hour))
	d, err := e.Decide(ctx, Input{Work: WorkInput("hex", job("hexagonal_4p"), 0), Cluster: ClusterInput(fleet), Usage: usage})
	if err != nil || !d.Allow {
		t.Errorf("two days later: %v %s, want allowed", err, d.Summary())
	}
}

func TestSeed002OneTrainingPerConfigAndProviders(t *testing.T) {
	e := loadEngine(t)
	ctx := context.Background()
	fleet := seed002Fleet()
	now := time.Date(2025, 12, 26, 12, 0, 0, 0, time.UTC)
	train := workspec.Spec{Name: "t", Kind: workspec.KindTraining, Config: "square19_2p", Roles: []workspec.Role{{Name: "trainer", Count: 1, CPUs: 8, GPUs: 1, MemoryMB: 64000}}}
	running := []UsageRecord{{WorkID: "t0", Config: "square19_2p", Kind: "training", Node: "runpod-h100", GPUs: 1, Start: now.Add(-time.Hour)}}
	usage := AggregateUsage(e.Params(), fleet, running, now)
	d, err := e.Decide(ctx, Input{Work: WorkInput("t1", train, 0), Cluster: ClusterInput(fleet), Usage: usage})
	if err != nil {
		t.Fatal(err)
	}
	if d.Allow || d.Violations[0].Rule != "one_training_per_config" {
		t.Errorf("second square19_2p training: %s", d.Summary())
	}
	order, err := e.ProviderOrder(ctx, Input{Work: WorkInput("t1", train, 0), Cluster: ClusterInput(fleet)})
	if want := []string{"runpod", "nebius", "vultr"}; err != nil || !reflect.DeepEqual(order, want) {
		t.Errorf("training provider order %v (%v), want %v (vast avoided)", order, err, want)
	}
	sp := train
	sp.Kind = workspec.KindSelfPlay
	d, err = e.Decide(ctx, Input{Work: WorkInput("s1", sp, 0), Cluster: ClusterInput(fleet), Usage: usage})
	if err != nil || !d.Allow {
		t.Errorf("self-play: %v %s, want allowed", err, d.Summary())
	}
	order, err = e.ProviderOrder(ctx, Input{Work: WorkInput("s1", sp, 0), Cluster: ClusterInput(fleet)})
	if want := []string{"vast", "vultr", "nebius", "runpod"}; err != nil || !reflect.DeepEqual(order, want) {
		t.Errorf("self-play provider order %v (%v), want the cheap ones first %v", order, err, want)
	}
}

const seed000Spec = `
name: zelda-production
kind: rollout
config: zelda
rollout: {workers: 7, envs_per_worker: 12, episode_length: 61440, batch_size: 32768}
roles:
  - name: rollout_worker
    cpus: 6
    memory_mb: 24000
    max_concurrency: 100
    anti_affinity: [{key: role, values: [rollout_worker]}]
`

// TestSeed000AdmitsAndPlaces: admission, placement with the policy's own
// params, then the placement checked by the policy again.
func TestSeed000AdmitsAndPlaces(t *testing.T) {
	e := loadPreservingEngine(t)
	var pool []scheduler.Node
	for i := 1; i <= 6; i++ {
		pool = append(pool, fleetNode(fmt.Sprintf("g5-%d", i), "aws", false, 7.5, 30, 23028))
	}
	pool = append(pool, fleetNode("cpu-1", "aws", false, 63.5, 127), fleetNode("cpu-2", "aws", false, 63.5, 127))
	spec, err := workspec.Parse([]byte(seed000Spec))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in := Input{Work: WorkInput("zelda", spec, 0), Cluster: ClusterInput(pool)}
	d, err := e.Decide(ctx, in)
	if err != nil || !d.Allow {
		t.Fatalf("seed-000 job: %v %s", err, d.Summary())
	}
	pl := scheduler.New(e.Params()).Place(pool, scheduler.Work{ID: "zelda", Spec: spec})
	if pl.Status != scheduler.Placed || len(pl.Assignments) != 7 {
		t.Fatalf("placement %s: %s", pl.Status, pl.Reason)
	}
	in.Placement = PlacementInput(pl.Assignments)
	if d, err := e.Decide(ctx, in); err != nil || !d.Allow {
		t.Fatalf("placement check: %v %s", err, d.Summary())
	}
	// Asking rollout workers to take a GPU share breaks preservation.
	spec.Roles[0].GPUs = 0.5
	d, err = e.Decide(ctx, Input{Work: WorkInput("zelda", spec, 0), Cluster: ClusterInput(pool)})
	if err != nil || d.Allow || d.Violations[0].Rule != "gpu_preservation" {
		t.Errorf("rollout with GPUs: %v %s", err, d.Summary())
	}
	// A placement that overfills a node or takes a reserved GPU is denied.
	bad := []Placed{
		{Node: "g5-1", Role: "rollout_worker", Count: 2, CPUs: 6, MemoryMB: 24000},
		{Node: "g5-2", Role: "trainer", CPUs: 1, MemoryMB: 1000, GPUs: []PlacedGPU{{Index: 0, Share: 1}}},
	}
	d, err = e.Decide(ctx, Input{Work: WorkInput("zelda", spec, 0), Cluster: ClusterInput(pool), Placement: bad})
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]int{}
	for _, v := range d.Violations {
		rules[v.Rule]++
	}
	// gpu_preservation fires three times: the rollout GPU share, the
	// reserved GPU in the placement, and 7 GPUs wanted with none unreserved.
	if rules["node_capacity"] != 2 || rules["gpu_preservation"] != 3 {
		t.Errorf("violations %+v, want CPU and memory over share on g5-1, the reserved GPU and no unreserved GPU left", d.Violations)
	}
}

func TestDecisionIdentity(t *testing.T) {
	e := loadEngine(t)
	ctx := context.Background()
	in := Input{Work: Work{ID: "w", Kind: "rollout", Config: "zelda", Roles: []Role{{Name: "r", Count: 1, CPUs: 1, MemoryMB: 1}}},
		Cluster: Cluster{Nodes: []Node{{Name: "n", CPUs: 8, MemoryMB: 8000}}}}
	d1, err := e.Decide(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := e.Decide(ctx, in)
	in.Work.Priority = 1
	d3, _ := e.Decide(ctx, in)
	if d1.InputHash != d2.InputHash || d1.InputHash == d3.InputHash {
		t.Errorf("input hashes %s %s %s: want equal for equal input, different otherwise", d1.InputHash, d2.InputHash, d3.InputHash)
	}
	if d1.Revision != e.Revision() || len(d1.Revision) != 16 {
		t.Errorf("revision %q", d1.Revision)
	}
	b := e.Bundle()
	b.Data = withParam(t, b.Data, "capacity_share", 0.8)
	if b.Revision() == e.Revision() {
		t.Error("changing data did not change the revision")
	}
	// Starvation boost shows up in the decision.
	in.Work.WaitingSeconds = 5 * 3600
	d4, _ := e.Decide(ctx, in)
	if d4.Priority != 101 {
		t.Errorf("priority after 5 h = %d, want 101", d4.Priority)
	}
}

func TestDryRun(t *testing.T) {
	ctx := context.Background()
	cur, err := LoadDir(policiesDir)
	if err != nil {
		t.Fatal(err)
	}
	prop := Bundle{Modules: cur.Modules, Data: withParam(t, cur.Data, "capacity_share", 0.8)}
	node := Node{Name: "g5", CPUs: 7.5, MemoryMB: 30000}
	mk := func(id string, cpus float64) Input {
		return Input{Work: Work{ID: id, Kind: "rollout", Config: "zelda", Roles: []Role{{Name: "rollout_worker", Count: 1, CPUs: cpus, MemoryMB: 1000}}}, Cluster: Cluster{Nodes: []Node{node}}}
	}
	items := []Input{mk("small", 4), mk("seed", 6.5), mk("huge", 7)}
	changes, err := DryRun(ctx, cur, prop, items)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 {
		t.Fatalf("changes = %+v, want the 6.5-CPU item and the 7-CPU one's reason", changes)
	}
	c := changes[0]
	if c.WorkID != "seed" || c.Index != 1 || !c.Before.Allow || c.After.Allow || len(c.Added) != 1 || c.Added[0].Rule != "node_capacity" || len(c.Removed) != 0 {
		t.Errorf("change %+v", c)
	}
	// "huge" is denied before and after, but why changed (90% → 80%).
	if h := changes[1]; h.WorkID != "huge" || h.Before.Allow || h.After.Allow || len(h.Added) != 1 || len(h.Removed) != 1 {
		t.Errorf("change %+v, want huge's reason swapped", h)
	}
	prop.Data = withParam(t, cur.Data, "capacity_share", 0.95)
	changes, err = DryRun(ctx, cur, prop, items)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].WorkID != "huge" || !changes[0].After.Allow || len(changes[0].Removed) != 1 {
		t.Errorf("changes = %+v, want huge admitted at 95%%", changes)
	}
	if _, err := DryRun(ctx, cur, Bundle{Modules: map[string]string{"x.rego": "package x\nallow if {"}}, items); err == nil {
		t.Error("a broken proposal gave no error")
	}
}

func TestDecisionLog(t *testing.T) {
	l := NewLog(3)
	t0 := time.Unix(1000, 0)
	for i := 0; i < 5; i++ {
		l.Append(t0.Add(time.Duration(i)*time.Second), fmt.Sprint("w", i), Decision{Allow: i%2 == 0, Revision: "r", InputHash: fmt.Sprint(i)})
	}
	tests := []struct {
		after int64
		limit int
		want  []uint64
	}{
		{0, 0, []uint64{3, 4, 5}}, // sequence numbers start at 1; 1 and 2 fell out
		{-1, 0, []uint64{3, 4, 5}},
		{3, 0, []uint64{4, 5}},
		{0, 2, []uint64{3, 4}},
		{5, 0, nil},
	}
	for _, tt := range tests {
		var got []uint64
		for _, e := range l.List(tt.after, tt.limit) {
			got = append(got, e.Seq)
			if e.WorkID != fmt.Sprint("w", e.Seq-1) || e.InputHash != fmt.Sprint(e.Seq-1) {
				t.Errorf("entry %d = %+v", e.Seq, e)
			}
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("List(%d, %d) = %v, want %v", tt.after, tt.limit, got, tt.want)
		}
	}
}

func TestLoadFSErrors(t *testing.T) {
	if _, err := New(context.Background(), Bundle{Modules: map[string]string{"a.rego": "package trainyard.admission\nallow := true"}, Data: map[string]any{}}); err == nil {
		t.Error("bundle without trainyard.params accepted")
	}
	if _, err := LoadDir(t.TempDir()); err == nil {
		t.Error("empty dir accepted")
	}
}
