package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/trainyard/trainyard/internal/scheduler"
)

// fullInput sets every field of every input type (slices non-empty, maps
// non-empty, pointers non-nil).
func fullInput() Input {
	return Input{
		Work: Work{ID: "w", Kind: "training", Config: "hexagonal_4p", Board: "hexagonal", Priority: 3, WaitingSeconds: 7,
			Roles:              []Role{{Name: "trainer", Count: 1, CPUs: 7.5, GPUs: 0.25, MemoryMB: 1000, MinVRAMMB: 2}},
			Providers:          &Providers{Prefer: []string{"runpod"}, Avoid: []string{"vast"}},
			Capabilities:       &Capabilities{HTTP: []string{"llm"}, HTTPRate: 20},
			PluginCapabilities: []string{"http:llm"}},
		Cluster: Cluster{Nodes: []Node{
			{Name: "a", Provider: "vast", Ephemeral: true, CPUs: 8, MemoryMB: 64000, GPUs: []GPU{{Index: 0, VRAMMB: 24576}}, Used: Used{CPUs: 1.5, MemoryMB: 100}},
			{Name: "b", CPUs: 2, MemoryMB: 10},
		}, Endpoints: []Endpoint{{Name: "llm", Nodes: []string{"a"}, GPUs: 1}}},
		Usage:     Usage{Tier1CapacitySeconds: 86400, Tier1GPUSecondsByConfig: map[string]float64{"x": 1.5, "a": 2}, RunningTrainingByConfig: map[string]int{"x": 1}},
		Placement: []Placed{{Node: "a", Role: "trainer", Count: 2, CPUs: 1, MemoryMB: 5, GPUs: []PlacedGPU{{Index: 0, Share: 0.5}}}, {Node: "b", Role: "r"}},
	}
}

// TestValueMatchesJSON: the hand-built AST equals OPA's reading of the
// input's JSON, plus the two documents the engine derives (the cluster
// summary and the usage shares), so policies see the documented shape.
func TestValueMatchesJSON(t *testing.T) {
	tests := []struct {
		name   string
		in     Input
		shares map[string]float64
	}{
		{"full", fullInput(), map[string]float64{"a": 2.0 / 86400, "x": 1.5 / 86400}},
		{"empty", Input{}, nil},
		{"no roles", Input{Work: Work{ID: "x", Roles: []Role{}}, Cluster: Cluster{Nodes: []Node{}}}, nil},
		{"no capacity", Input{Usage: Usage{Tier1GPUSecondsByConfig: map[string]float64{"x": 3}}}, nil},
		// Strings the cluster's hand-written JSON must escape, and floats
		// at the edges of encoding/json's notations.
		{"escapes and floats", Input{Cluster: Cluster{Nodes: []Node{
			{Name: `a"b\c`, Provider: "prövider", CPUs: 1e-7, MemoryMB: 1 << 40, GPUs: []GPU{{Index: 3, VRAMMB: 1}, {Index: 1, VRAMMB: 2}}, Used: Used{CPUs: 0.1}},
			{Name: "<tab\t>\u2028\x01", CPUs: 1e21, Used: Used{CPUs: 123456.789, MemoryMB: -1}},
		}, Endpoints: []Endpoint{{Name: "ep\n", Nodes: []string{`a"b\c`}}, {Name: "none"}}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ast.ValueFromReader(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			got := tt.in.value(clusterValue(tt.in.Cluster), usageValue(tt.in.Usage)).(ast.Object)
			usage := got.Get(ast.StringTerm("usage")).Value.(ast.Object)
			var shares map[string]float64
			if s := usage.Get(ast.StringTerm("tier1_share_by_config")); s != nil {
				if err := ast.As(s.Value, &shares); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(shares, tt.shares) {
				t.Errorf("tier1_share_by_config = %v, want %v", shares, tt.shares)
			}
			// Without the derived documents, the AST is the JSON.
			got = withoutKey(got, "usage", "tier1_share_by_config")
			got = withoutKey(got, "cluster", "summary")
			if ast.Compare(got, want) != 0 {
				t.Errorf("AST differs from JSON:\n got  %v\n want %v", got, want)
			}
			// The Wasm evaluator's JSON documents, derived ones included,
			// are the terms.
			for _, doc := range []struct {
				name string
				json func() ([]byte, error)
				term *ast.Term
			}{
				{"cluster", func() ([]byte, error) { return clusterJSON(tt.in.Cluster), nil }, clusterValue(tt.in.Cluster)},
				{"usage", func() ([]byte, error) { return usageJSON(tt.in.Usage) }, usageValue(tt.in.Usage)},
			} {
				raw, err := doc.json()
				if err != nil {
					t.Fatal(err)
				}
				v, err := ast.ValueFromReader(bytes.NewReader(raw))
				if err != nil {
					t.Fatal(err)
				}
				if ast.Compare(v, doc.term.Value) != 0 {
					t.Errorf("%s JSON differs from its term:\n json %s\n term %v", doc.name, raw, doc.term)
				}
			}
		})
	}
}

// withoutKey drops o[doc][k].
func withoutKey(o ast.Object, doc, k string) ast.Object {
	d := o.Get(ast.StringTerm(doc)).Value.(ast.Object)
	inner := ast.NewObject()
	d.Foreach(func(key, v *ast.Term) {
		if key.Value.Compare(ast.String(k)) != 0 {
			inner.Insert(key, v)
		}
	})
	out := ast.NewObject()
	o.Foreach(func(key, v *ast.Term) {
		if key.Value.Compare(ast.String(doc)) == 0 {
			v = ast.NewTerm(inner)
		}
		out.Insert(key, v)
	})
	return out
}

// TestSummaryMatchesRego: the cluster document the engine builds equals
// what the Rego tests' cluster(nodes) fixture builds from the same nodes,
// so the Rego unit tests exercise the input the engine really sends.
func TestSummaryMatchesRego(t *testing.T) {
	b, err := LoadDir(policiesDir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := roundTrip(b.Data)
	if err != nil {
		t.Fatal(err)
	}
	opts := []func(*rego.Rego){
		rego.Query(`x := data.trainyard.admission_test.cluster(input.nodes)`),
		rego.Store(inmem.NewFromObject(data)),
		rego.SetRegoVersion(ast.RegoV1),
	}
	for path, src := range b.Modules {
		opts = append(opts, rego.Module(path, src))
	}
	pq, err := rego.New(opts...).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var seed000 []scheduler.Node
	for i := 1; i <= 6; i++ {
		seed000 = append(seed000, fleetNode(fmt.Sprintf("g5-%d", i), "aws", false, 7.5, 30, 23028))
	}
	seed000 = append(seed000, fleetNode("cpu-1", "aws", false, 63.5, 127), fleetNode("cpu-2", "aws", false, 63.5, 127))
	odd := []scheduler.Node{
		fleetNode("fat", "", false, 8, 512),
		fleetNode("wide", "x", true, 96, 64),
		fleetNode("twin-1", "y", false, 32, 256, 1000, 3000),
		fleetNode("twin-2", "y", false, 32, 256),
		fleetNode("half", "x", false, 0.5, 1),
	}
	odd[3].Allocations = []scheduler.Allocation{{WorkID: "w", Role: "r", CPUs: 3, MemoryMB: 100}}
	fleets := map[string]Cluster{
		"seed-002": ClusterInput(seed002Fleet()),
		"seed-000": ClusterInput(seed000),
		"odd":      ClusterInput(odd),
		"full":     fullInput().Cluster,
		"none":     {Nodes: []Node{}},
	}
	for name, c := range fleets {
		t.Run(name, func(t *testing.T) {
			raw, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			in, err := ast.ValueFromReader(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			rs, err := pq.Eval(context.Background(), rego.EvalParsedInput(in))
			if err != nil || len(rs) != 1 {
				t.Fatalf("fixture: %v %v", rs, err)
			}
			want, err := ast.InterfaceToValue(rs[0].Bindings["x"])
			if err != nil {
				t.Fatal(err)
			}
			// The fixture builds nodes and summary; endpoints ride beside them
			// (capabilities_test.rego adds them with object.union).
			if got := clusterValue(Cluster{Nodes: c.Nodes}); ast.Compare(got.Value, want) != 0 {
				t.Errorf("engine's cluster document differs from the Rego fixture's:\n got  %v\n want %v", got, want)
			}
		})
	}
}

// TestInputHashCoversEveryField changes each field of fullInput in turn
// (reached through reflection, so a new field is covered automatically)
// and wants a different input hash each time.
func TestInputHashCoversEveryField(t *testing.T) {
	e := &Engine{}
	base := fullInput()
	p, err := e.input(&base, false)
	if err != nil {
		t.Fatal(err)
	}
	baseHash := p.hash
	again := fullInput()
	if p, _ := e.input(&again, false); p.hash != baseHash {
		t.Fatalf("equal inputs hash differently: %s %s", p.hash, baseHash)
	}
	var paths []string
	var muts []func(reflect.Value)
	collectMutations(reflect.TypeOf(base), "input", func(r reflect.Value) reflect.Value { return r }, &paths, &muts)
	if len(muts) < 40 {
		t.Fatalf("%d mutations, want one per input field", len(muts))
	}
	for i, mutate := range muts {
		in := fullInput()
		mutate(reflect.ValueOf(&in).Elem())
		if p, err := e.input(&in, false); err != nil || p.hash == baseHash {
			t.Errorf("changing %s leaves the input hash unchanged", paths[i])
		}
	}
}

// collectMutations appends one change per leaf under type typ, reached from
// the root by at: strings, numbers and bools change value; slices, maps and
// pointers also become nil, slices are followed through their first
// element, maps get their first key's value changed.
func collectMutations(typ reflect.Type, path string, at func(reflect.Value) reflect.Value, paths *[]string, muts *[]func(reflect.Value)) {
	add := func(p string, f func(reflect.Value)) {
		*paths = append(*paths, p)
		*muts = append(*muts, f)
	}
	switch typ.Kind() {
	case reflect.Struct:
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			collectMutations(f.Type, path+"."+f.Name, func(r reflect.Value) reflect.Value { return at(r).Field(i) }, paths, muts)
		}
	case reflect.Pointer:
		add(path+"=nil", func(r reflect.Value) { at(r).SetZero() })
		collectMutations(typ.Elem(), path, func(r reflect.Value) reflect.Value { return at(r).Elem() }, paths, muts)
	case reflect.Slice:
		add(path+"=nil", func(r reflect.Value) { at(r).SetZero() })
		add(path+"+1", func(r reflect.Value) { v := at(r); v.Set(reflect.Append(v, reflect.Zero(typ.Elem()))) })
		collectMutations(typ.Elem(), path+"[0]", func(r reflect.Value) reflect.Value { return at(r).Index(0) }, paths, muts)
	case reflect.Map:
		add(path+"=nil", func(r reflect.Value) { at(r).SetZero() })
		add(path+"[new]", func(r reflect.Value) { at(r).SetMapIndex(reflect.ValueOf("new"), reflect.Zero(typ.Elem())) })
		add(path+"[first]", func(r reflect.Value) {
			m := at(r)
			k := m.MapKeys()[0]
			v := reflect.New(typ.Elem()).Elem()
			v.Set(m.MapIndex(k))
			bump(v)
			m.SetMapIndex(k, v)
		})
	default:
		add(path, func(r reflect.Value) { bump(at(r)) })
	}
}

func bump(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Float64:
		v.SetFloat(v.Float() + 0.25)
	default:
		panic("input field of kind " + v.Kind().String() + ": teach bump and the hash about it")
	}
}

// TestNonFiniteInputRefused: NaN and Inf never reach OPA (its arithmetic
// panics on them); the old JSON encoding refused them too.
func TestNonFiniteInputRefused(t *testing.T) {
	e := loadEngine(t)
	for name, change := range map[string]func(*Input){
		"role cpus":  func(in *Input) { in.Work.Roles[0].CPUs = math.NaN() },
		"node cpus":  func(in *Input) { in.Cluster.Nodes[0].CPUs = math.Inf(1) },
		"usage":      func(in *Input) { in.Usage.Tier1GPUSecondsByConfig["x"] = math.NaN() },
		"gpu share":  func(in *Input) { in.Placement[0].GPUs[0].Share = math.Inf(-1) },
		"used cpus":  func(in *Input) { in.Cluster.Nodes[1].Used.CPUs = math.NaN() },
		"capacity":   func(in *Input) { in.Usage.Tier1CapacitySeconds = math.Inf(1) },
		"role gpus":  func(in *Input) { in.Work.Roles[0].GPUs = math.NaN() },
		"place cpus": func(in *Input) { in.Placement[1].CPUs = math.NaN() },
	} {
		in := fullInput()
		change(&in)
		if _, err := e.Decide(context.Background(), in); err == nil {
			t.Errorf("%s: non-finite input accepted", name)
		}
	}
}

// TestRestJSONIsEncodingJSON: the hand-written work and placement JSON is
// byte for byte what encoding/json writes: for the full input changed in
// each of its fields in turn (a field added to the types but not to
// restJSON fails here), for generated inputs, and for strings and floats at
// the edges.
func TestRestJSONIsEncodingJSON(t *testing.T) {
	var paths []string
	var muts []func(reflect.Value)
	collectMutations(reflect.TypeOf(Input{}), "input", func(r reflect.Value) reflect.Value { return r }, &paths, &muts)
	ins := []Input{fullInput(), {}, {Work: Work{Roles: []Role{}, Providers: &Providers{}, Capabilities: &Capabilities{}}}}
	names := []string{"full", "zero", "empty"}
	for i, mutate := range muts {
		in := fullInput()
		mutate(reflect.ValueOf(&in).Elem())
		ins, names = append(ins, in), append(names, paths[i])
	}
	odd := fullInput()
	odd.Work.ID, odd.Work.Config = `a"b\c`, "<tab\t>\u2028\x01é"
	odd.Work.Roles = append(odd.Work.Roles, Role{Name: "x", CPUs: 1e-7, GPUs: 1e21, MemoryMB: -1})
	odd.Work.Providers = &Providers{Avoid: []string{"z"}}
	odd.Work.Capabilities = &Capabilities{HTTP: []string{}, HTTPRate: 0.5}
	odd.Placement = []Placed{{Node: "n", Role: "r", CPUs: 123456.789, GPUs: []PlacedGPU{{Index: 2, Share: 0.25}}}, {Node: "m", Count: 3}}
	ins, names = append(ins, odd), append(names, "odd")
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		ins, names = append(ins, genInput(r)), append(names, fmt.Sprint("generated ", i))
	}
	for i, in := range ins {
		want, err := json.Marshal(struct {
			Work      Work     `json:"work"`
			Placement []Placed `json:"placement,omitempty"`
		}{in.Work, in.Placement})
		if err != nil {
			t.Fatal(err)
		}
		if got := restJSON(nil, &in.Work, in.Placement); !bytes.Equal(got, want) {
			t.Fatalf("%s:\n got %s\nwant %s", names[i], got, want)
		}
	}
}

// TestUsageJSONIsEncodingJSON: the hand-written usage document is byte for
// byte what encoding/json writes, for empty, odd and generated usage.
func TestUsageJSONIsEncodingJSON(t *testing.T) {
	us := []Usage{{}, {Tier1CapacitySeconds: 86400, Tier1GPUSecondsByConfig: map[string]float64{}, RunningTrainingByConfig: map[string]int{}},
		{Tier1CapacitySeconds: 1e-7, Tier1GPUSecondsByConfig: map[string]float64{`a"b\c`: 1e21, "é\t": 0.5, "": 3}, RunningTrainingByConfig: map[string]int{"x": -2, "y": 0}}}
	r := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		u := Usage{Tier1CapacitySeconds: float64(r.IntN(3)) * r.Float64() * 1e6, Tier1GPUSecondsByConfig: map[string]float64{}, RunningTrainingByConfig: map[string]int{}}
		for range r.IntN(6) {
			u.Tier1GPUSecondsByConfig[fmt.Sprint("cfg_", r.IntN(9))] = r.Float64() * 1e5
			u.RunningTrainingByConfig[fmt.Sprint("cfg_", r.IntN(9))] = r.IntN(3)
		}
		us = append(us, u)
	}
	for i, u := range us {
		want, err := json.Marshal(usageDoc{Usage: u, Tier1ShareByConfig: tier1Shares(u)})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := usageJSON(u); !bytes.Equal(got, want) {
			t.Fatalf("usage %d:\n got %s\nwant %s", i, got, want)
		}
	}
}
