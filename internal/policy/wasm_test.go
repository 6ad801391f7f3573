package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/trainyard/trainyard/internal/workspec"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// diffBundles are the bundles the Wasm module is checked against OPA's
// interpreter with: the defaults, GPU preservation on (GPUs reserved by key
// and per node, or per node alone), a rate cap, and a rule of the kind
// people push (a freeze reading the work ID, a set in its reason).
func diffBundles(t testing.TB) map[string]Bundle {
	t.Helper()
	base, err := LoadDir(policiesDir)
	if err != nil {
		t.Fatal(err)
	}
	withData := func(key string, v any) Bundle {
		return Bundle{Modules: base.Modules, Data: withParam(t, base.Data, key, v)}
	}
	freeze := Bundle{Modules: map[string]string{}, Data: base.Data}
	for p, src := range base.Modules {
		freeze.Modules[p] = src
	}
	freeze.Modules["freeze.rego"] = `package trainyard.admission

import rego.v1

deny contains {"rule": "training_freeze", "reason": sprintf("%s is frozen; roles %v", [input.work.id, {r.name | some r in input.work.roles}])} if {
	input.work.kind == "training"
	startswith(input.work.id, "run-")
}
`
	return map[string]Bundle{
		"default":      base,
		"preservation": withData("gpu_preservation", map[string]any{"enabled": true, "reserved": []any{"runpod-h100:0", "g5-2:0"}, "reserved_per_node": 1, "cpu_only_roles": []any{"rollout_worker", "selfplay"}}),
		// Reserved per node alone: free_gpus from the per-rank totals.
		"preservation-per-node": withData("gpu_preservation", map[string]any{"enabled": true, "reserved_per_node": 1, "cpu_only_roles": []any{"rollout_worker", "selfplay"}}),
		"rate-cap":              withData("capabilities", map[string]any{"max_http_rate": 100}),
		"freeze":                freeze,
	}
}

// genInput draws an input that can reach every rule: kinds, configs with
// and without quotas, boards, fractional and oversized requests, provider
// preferences, capability grants, starvation, usage over quota, running
// training, endpoints and proposed placements (on unknown nodes too).
func genInput(r *rand.Rand) Input {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	some := func(xs ...string) []string {
		var out []string
		for _, x := range xs {
			if r.IntN(3) == 0 {
				out = append(out, x)
			}
		}
		return out
	}
	floats := func(xs ...float64) float64 { return xs[r.IntN(len(xs))] }
	ints := func(xs ...int64) int64 { return xs[r.IntN(len(xs))] }

	w := Work{
		ID:             pick("run-1", "job-2", "sweep-3"),
		Kind:           pick("training", "selfplay", "evaluation", "rollout", "batch", "sweep-trial"),
		Config:         pick("hexagonal_4p", "hexagonal_2p", "square19_2p", "square8_3p", "hex8_2p", "zelda", ""),
		Priority:       int(ints(-5, 0, 5)),
		WaitingSeconds: ints(0, 14399, 14400, 86400),
	}
	w.Trains = workspec.Trains(w.Kind)
	if r.IntN(4) == 0 {
		w.Board = pick("square19", "hexagonal", "go9")
	}
	for range 1 + r.IntN(3) {
		w.Roles = append(w.Roles, Role{
			Name:     pick("trainer", "rollout_worker", "selfplay", "data_loader", "evaluator"),
			Count:    int(ints(1, 2, 8)),
			CPUs:     floats(0.5, 1, 6, 6.75, 7, 100),
			GPUs:     floats(0, 0, 0.25, 0.5, 1, 2, 9),
			MemoryMB: ints(1000, 24000, 28000, 1<<30),
		})
	}
	if r.IntN(3) == 0 {
		w.Providers = &Providers{Prefer: some("vast", "runpod", "nebius"), Avoid: some("vast", "vultr")}
	}
	if r.IntN(3) == 0 {
		w.Capabilities = &Capabilities{HTTP: some("llm", "judge", "openai"), HTTPRate: floats(0, 10, 500)}
		w.PluginCapabilities = some("http:llm", "http:judge")
	}

	fleet := append(seed002Fleet(), fleetNode("g5-1", "aws", false, 7.5, 30, 23028), fleetNode("g5-2", "aws", false, 7.5, 30, 23028), fleetNode("cpu-1", "aws", false, 63.5, 127))
	var c Cluster
	for _, n := range ClusterInput(fleet).Nodes {
		if r.IntN(3) > 0 {
			if r.IntN(4) == 0 {
				n.Used = Used{CPUs: floats(1, 6.5), MemoryMB: ints(1000, 20000)}
			}
			c.Nodes = append(c.Nodes, n)
		}
	}
	if len(c.Nodes) > 0 && r.IntN(3) == 0 {
		c.Endpoints = []Endpoint{{Name: "llm", Nodes: []string{c.Nodes[0].Name}, GPUs: 1}}
	}
	u := Usage{Tier1CapacitySeconds: 5 * 86400, Tier1GPUSecondsByConfig: map[string]float64{}, RunningTrainingByConfig: map[string]int{}}
	if w.Config != "" {
		u.Tier1GPUSecondsByConfig[w.Config] = floats(0, 0.05, 0.26, 0.9) * u.Tier1CapacitySeconds
		if r.IntN(4) == 0 {
			u.RunningTrainingByConfig[w.Config] = 1
		}
	}
	in := Input{Work: w, Cluster: c, Usage: u}
	if r.IntN(3) == 0 {
		for _, role := range w.Roles {
			node := "ghost"
			if len(c.Nodes) > 0 && r.IntN(5) > 0 {
				node = c.Nodes[r.IntN(len(c.Nodes))].Name
			}
			p := Placed{Node: node, Role: role.Name, Count: role.Count, CPUs: role.CPUs, MemoryMB: role.MemoryMB}
			if role.GPUs > 0 {
				p.GPUs = []PlacedGPU{{Index: r.IntN(2), Share: role.GPUs}}
			}
			in.Placement = append(in.Placement, p)
		}
	}
	return in
}

// sameDecision decides in with both evaluators and wants equal results.
func sameDecision(t *testing.T, e *Engine, in Input) Decision {
	t.Helper()
	ctx := context.Background()
	want, errT := e.decide(ctx, in, false)
	got, errW := e.decide(ctx, in, true)
	if (errT == nil) != (errW == nil) {
		t.Fatalf("interpreter error %v, wasm error %v; input %+v", errT, errW, in)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("wasm and interpreter disagree on %+v\n wasm        %+v\n interpreter %+v", in, got, want)
	}
	return got
}

// TestWasmDecidesLikeTopdown: the Wasm module and OPA's interpreter give
// the same decision, every violation and reason included, on generated
// inputs under each bundle, and again after a change to one node's use.
func TestWasmDecidesLikeTopdown(t *testing.T) {
	reached := map[string]bool{}
	for name, b := range diffBundles(t) {
		t.Run(name, func(t *testing.T) {
			e, err := New(context.Background(), b)
			if err != nil {
				t.Fatal(err)
			}
			if e.Evaluator() != "wasm" {
				t.Fatalf("evaluator %s", e.Evaluator())
			}
			r := rand.New(rand.NewPCG(1, uint64(len(name))))
			// 200 inputs a bundle (400 took 42 s under -race; the fuzz
			// target, policy-fuzz, goes further).
			const inputs = 200
			denied, rules := 0, map[string]bool{}
			for range inputs {
				in := genInput(r)
				d := sameDecision(t, e, in)
				if !d.Allow {
					denied++
				}
				for _, v := range d.Violations {
					rules[v.Rule] = true
				}
				// The same fleet with one node's use changed: the VM
				// patches its cached document.
				if n := len(in.Cluster.Nodes); n > 0 {
					in.Cluster.Nodes = slices.Clone(in.Cluster.Nodes)
					in.Cluster.Nodes[r.IntN(n)].Used.CPUs += float64(r.IntN(40)) / 2
					sameDecision(t, e, in)
				}
			}
			// The generator must reach the rules, or agreeing proves little.
			if denied < inputs/4 || len(rules) < 5 {
				t.Fatalf("only %d of %d inputs denied, rules %v", denied, inputs, rules)
			}
			for r := range rules {
				reached[r] = true
			}
			t.Logf("%d of %d denied; rules seen: %v", denied, inputs, rules)
		})
	}
	// Each shipped rule decided some input under some bundle.
	for _, r := range []string{"node_capacity", "gpu_preservation", "gpu_tier", "provider", "capabilities", "config_quota", "one_training_per_config"} {
		if !reached[r] {
			t.Errorf("no bundle's inputs reached rule %s (reached %v)", r, reached)
		}
	}
}

// FuzzWasmDecidesLikeTopdown feeds generated inputs with fuzzed strings
// (config, role name, work ID: they reach sprintf, JSON and glob matching)
// and numbers to both evaluators.
func FuzzWasmDecidesLikeTopdown(f *testing.F) {
	f.Add(uint64(1), "hexagonal_4p", "trainer", "run-1", 1.0, int64(1000))
	f.Add(uint64(2), "square8_\x00\"é", "rollout\\worker", "run-\u2028", 0.25, int64(1<<40))
	f.Add(uint64(3), "", "", "", -1.5, int64(-1))
	engines := map[string]*Engine{}
	for name, b := range diffBundles(f) {
		e, err := New(context.Background(), b)
		if err != nil {
			f.Fatal(err)
		}
		engines[name] = e
	}
	f.Fuzz(func(t *testing.T, seed uint64, config, role, id string, gpus float64, mem int64) {
		in := genInput(rand.New(rand.NewPCG(seed, 7)))
		in.Work.Config, in.Work.ID = config, id
		in.Work.Roles[0].Name, in.Work.Roles[0].GPUs, in.Work.Roles[0].MemoryMB = role, gpus, mem
		for _, e := range engines {
			sameDecision(t, e, in)
		}
	})
}

// TestWasmTrapIsAnErrorAndTheNextDecisionWorks: a policy that fails at
// evaluation (two values for one complete rule) is an error from both
// evaluators, and a broken VM is replaced, not reused.
func TestWasmTrapIsAnErrorAndTheNextDecisionWorks(t *testing.T) {
	b := diffBundles(t)["default"]
	mods := map[string]string{"conflict.rego": `package trainyard.admission

import rego.v1

clash := 1 if input.work.kind == "training"

clash := 2 if input.work.kind == "training"

deny contains {"rule": "clash", "reason": sprintf("%v", [clash])} if clash
`}
	for p, src := range b.Modules {
		mods[p] = src
	}
	e, err := New(context.Background(), Bundle{Modules: mods, Data: b.Data})
	if err != nil {
		t.Fatal(err)
	}
	if e.Evaluator() != "wasm" {
		t.Fatalf("evaluator %s", e.Evaluator())
	}
	r := rand.New(rand.NewPCG(3, 4))
	in := genInput(r)
	in.Work.Kind = "training"
	for _, useWasm := range []bool{false, true} {
		if _, err := e.decide(context.Background(), in, useWasm); err == nil || !strings.Contains(err.Error(), "multiple") && !strings.Contains(err.Error(), "conflict") {
			t.Errorf("wasm=%v: err %v, want a conflict error", useWasm, err)
		}
	}
	in.Work.Kind = "selfplay"
	sameDecision(t, e, in)
}

// TestBundleThatDoesNotCompileToWasmIsDecidedByTheInterpreter: a rule the
// Wasm planner refuses leaves the engine on OPA's interpreter, which says
// so and decides.
func TestBundleThatDoesNotCompileToWasmIsDecidedByTheInterpreter(t *testing.T) {
	b := diffBundles(t)["default"]
	mods := map[string]string{"prefix.rego": `package trainyard.admission

import rego.v1

# A rule reading another rule under the same ref prefix, which the Wasm
# planner plans as one function and cannot call into while planning it.
role_limits[name].cpus := 64 if some name in {"trainer", "selfplay"}

role_limits[name].label := sprintf("%v CPUs", [role_limits[name].cpus]) if some name in {"trainer", "selfplay"}

deny contains {"rule": "role_limits", "reason": role_limits[r.name].label} if {
	some r in input.work.roles
	r.cpus > role_limits[r.name].cpus
}
`}
	for p, src := range b.Modules {
		mods[p] = src
	}
	e, err := New(context.Background(), Bundle{Modules: mods, Data: b.Data})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.Evaluator(), "topdown (not compiled to wasm: ") {
		t.Fatalf("evaluator %q, want topdown with the reason", e.Evaluator())
	}
	if _, err := e.Decide(context.Background(), genInput(rand.New(rand.NewPCG(5, 6)))); err != nil {
		t.Fatal(err)
	}
	t.Log(e.Evaluator())
}

// TestWasmConcurrentDecisions: decisions from many goroutines at once (the
// API's case) share the VM pool, each VM caching its own cluster and
// usage documents, and still agree with the interpreter. Run under -race.
func TestWasmConcurrentDecisions(t *testing.T) {
	e, err := New(context.Background(), diffBundles(t)["preservation"])
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for range 40 {
				in := genInput(r)
				want, errT := e.decide(context.Background(), in, false)
				got, errW := e.Decide(context.Background(), in)
				if (errT == nil) != (errW == nil) || !reflect.DeepEqual(got, want) {
					errs <- fmt.Errorf("goroutine %d: wasm %+v (%v), interpreter %+v (%v)", g, got, errW, want, errT)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPatchedClusterIsParsedCluster follows a fleet through changes: nodes'
// used resources (patched into the VM's cached document), a new usage
// document (patched), a node joining, a capacity and an endpoint changing
// (parsed whole). After each, the VM's cluster and usage documents must be
// what parsing the new ones gives, and the decision what the interpreter
// decides: the proposed placement fits node 0 until its used CPUs grow.
func TestPatchedClusterIsParsedCluster(t *testing.T) {
	e := loadEngine(t)
	ctx := context.Background()
	base := ClusterInput(seed002Fleet())
	usage := Usage{Tier1CapacitySeconds: 1000}
	type step struct {
		name   string
		change func(c *Cluster, u *Usage)
		patch  bool
		allow  bool
	}
	steps := []step{
		{"first", func(*Cluster, *Usage) {}, false, true},
		{"one node's used", func(c *Cluster, _ *Usage) { c.Nodes[3].Used = Used{CPUs: 2, MemoryMB: 1000} }, true, true},
		{"node 0 nearly full", func(c *Cluster, _ *Usage) { c.Nodes[0].Used = Used{CPUs: 28.5, MemoryMB: 2000} }, true, false},
		{"three nodes' used", func(c *Cluster, _ *Usage) {
			c.Nodes[0].Used = Used{}
			c.Nodes[5].Used.CPUs = 1.25
			c.Nodes[len(c.Nodes)-1].Used.MemoryMB = 512
		}, true, true},
		{"usage", func(_ *Cluster, u *Usage) { u.Tier1GPUSecondsByConfig = map[string]float64{"hexagonal_4p": 100} }, true, true},
		{"used and usage", func(c *Cluster, u *Usage) {
			c.Nodes[0].Used.CPUs = 29
			u.Tier1CapacitySeconds = 2000
		}, true, false},
		{"node joins", func(c *Cluster, _ *Usage) { c.Nodes = append(c.Nodes, Node{Name: "lab-1", CPUs: 8, MemoryMB: 16000}) }, false, false},
		{"used after the join", func(c *Cluster, _ *Usage) { c.Nodes[0].Used.CPUs = 0 }, true, true},
		{"capacity", func(c *Cluster, _ *Usage) { c.Nodes[0].CPUs = 16 }, false, true},
		{"endpoint", func(c *Cluster, _ *Usage) {
			c.Endpoints = []Endpoint{{Name: "llm", Nodes: []string{"runpod-h100"}, GPUs: 1}}
		}, false, true},
		{"node leaves", func(c *Cluster, _ *Usage) { c.Nodes = c.Nodes[1:] }, false, false},
	}
	cluster := base
	parsedWhole := 0
	for _, s := range steps {
		// Each step starts from copies, as callers build a new input.
		cluster.Nodes, cluster.Endpoints = slices.Clone(cluster.Nodes), slices.Clone(cluster.Endpoints)
		usage.Tier1GPUSecondsByConfig = maps.Clone(usage.Tier1GPUSecondsByConfig)
		s.change(&cluster, &usage)
		in := Input{
			Work:      Work{ID: "w", Kind: "rollout", Roles: []Role{{Name: "rollout_worker", Count: 1, CPUs: 2, MemoryMB: 1000}}},
			Cluster:   cluster,
			Usage:     usage,
			Placement: []Placed{{Node: "runpod-h100", Role: "rollout_worker", CPUs: 2, MemoryMB: 1000}},
		}
		if d := sameDecision(t, e, in); d.Allow != s.allow {
			t.Fatalf("%s: allow %v, want %v (%s)", s.name, d.Allow, s.allow, d.Summary())
		}
		vm, err := e.wasm.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if patched := vm.parsedWhole == parsedWhole; patched != s.patch {
			t.Errorf("%s: patched %v, want %v", s.name, patched, s.patch)
		}
		parsedWhole = vm.parsedWhole
		vmHolds(t, vm, s.name, cluster, usage)
		e.wasm.put(vm)
	}
}

// TestPatchGarbageIsBounded: node patches leave the replaced values
// behind; past wasmPatchBytes of them the documents are parsed whole
// again, so a fleet that keeps changing does not grow the VM's memory. A
// new usage document takes the place of the last one, so usage that
// changes on every decision (live usage) leaves no garbage and never
// causes a whole parse. Every 250 changes the VM's documents must still
// be the parsed ones.
func TestPatchGarbageIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name               string
		nodes, usage       bool
		minWhole, maxWhole int
	}{
		{"nodes change", true, false, 1, 5},
		{"usage changes", false, true, 0, 0},
		{"both change", true, true, 1, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := loadEngine(t)
			ctx := context.Background()
			cluster := ClusterInput(seed002Fleet())
			work := Work{ID: "w", Kind: "rollout", Roles: []Role{{Name: "rollout_worker", Count: 1, CPUs: 1, MemoryMB: 100}}}
			var usage Usage
			whole := 0
			for i := range 5000 {
				if tc.nodes {
					cluster.Nodes = slices.Clone(cluster.Nodes)
					cluster.Nodes[i%len(cluster.Nodes)].Used.CPUs = float64(i % 7)
				}
				if tc.usage {
					usage = Usage{Tier1CapacitySeconds: 1e6, Tier1GPUSecondsByConfig: map[string]float64{"hex8_2p": float64(i), "square8_2p": 1e5 - float64(i)}}
				}
				if _, err := e.decide(ctx, Input{Work: work, Cluster: cluster, Usage: usage}, true); err != nil {
					t.Fatal(err)
				}
				vm, err := e.wasm.get(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if vm.usageAt-vm.docsEnd > wasmPatchBytes+1<<10 || vm.evalHeap-vm.usageAt > 16<<10 {
					t.Fatalf("decision %d: %d bytes of patches, %d of usage", i, vm.usageAt-vm.docsEnd, vm.evalHeap-vm.usageAt)
				}
				if i == 0 {
					whole = vm.parsedWhole
				}
				if i%250 == 0 {
					vmHolds(t, vm, fmt.Sprintf("decision %d", i), cluster, usage)
				}
				if i == 4999 {
					whole = vm.parsedWhole - whole
				}
				e.wasm.put(vm)
			}
			if whole < tc.minWhole || whole > tc.maxWhole {
				t.Fatalf("parsed whole %d times in 5,000 changes, want %d to %d", whole, tc.minWhole, tc.maxWhole)
			}
		})
	}
}

// vmHolds fails unless the VM's cached documents are those of cluster and
// usage.
func vmHolds(t *testing.T, vm *wasmVM, when string, cluster Cluster, usage Usage) {
	t.Helper()
	wantUsage, err := usageJSON(usage)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []struct {
		name string
		addr uint32
		want []byte
	}{{"cluster", vm.clusterAddr, clusterJSON(cluster)}, {"usage", vm.usageAddr, wantUsage}} {
		got, err := vm.dump(context.Background(), vm.jsonDump, doc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, got, doc.want) {
			t.Fatalf("%s: the VM's %s document\n %s\nwant\n %s", when, doc.name, got, doc.want)
		}
	}
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// TestUsageRuleFromTheBundle: a rule is a usage rule (its work waits
// instead of being refused) because its deny entry says "waits": true, in
// Rego alone; both evaluators read it.
func TestUsageRuleFromTheBundle(t *testing.T) {
	b := diffBundles(t)["default"]
	mods := map[string]string{"gpu_hours.rego": `package trainyard.admission

import rego.v1

deny contains {"rule": "night_shift", "waits": true, "reason": "selfplay waits for the night"} if input.work.kind == "selfplay"

deny contains {"rule": "no_sweeps", "reason": "no sweeps here"} if input.work.kind == "sweep"
`}
	for p, src := range b.Modules {
		mods[p] = src
	}
	e, err := New(context.Background(), Bundle{Modules: mods, Data: b.Data})
	if err != nil {
		t.Fatal(err)
	}
	in := genInput(rand.New(rand.NewPCG(5, 6)))
	for _, tc := range []struct {
		kind, rule string
		waits      bool
	}{
		{"selfplay", "night_shift", true},
		{"sweep", "no_sweeps", false},
	} {
		in.Work.Kind = tc.kind
		d := sameDecision(t, e, in)
		i := slices.IndexFunc(d.Violations, func(v Violation) bool { return v.Rule == tc.rule })
		if i < 0 || d.Violations[i].Waits != tc.waits || strings.Contains(d.UsageViolations(), tc.rule) != tc.waits {
			t.Errorf("%s: violations %+v, usage %q; want %s with waits %v", tc.kind, d.Violations, d.UsageViolations(), tc.rule, tc.waits)
		}
	}
	only := Decision{Violations: []Violation{{Rule: "night_shift", Waits: true}}}
	mixed := Decision{Violations: []Violation{{Rule: "night_shift", Waits: true}, {Rule: "no_sweeps"}}}
	if !only.WaitsOnUsage() || mixed.WaitsOnUsage() {
		t.Errorf("WaitsOnUsage: only usage rules %v, with another %v; want true, false", only.WaitsOnUsage(), mixed.WaitsOnUsage())
	}
}
