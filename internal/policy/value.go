package policy

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The input's AST is built directly, mirroring its JSON encoding (omitempty
// fields left out): going through JSON text and OPA's decoder cost more
// than the policy evaluation itself. The engine adds two pre-aggregated
// documents the JSON does not have, input.cluster.summary (summaryTerm) and
// input.usage.tier1_share_by_config (usageValue). Object keys are shared
// terms and small numbers interned, which halves the allocations of a
// decision's input.

// value is the input document; cluster and usage are the prebuilt terms of
// in.Cluster and in.Usage (clusterValue, usageValue), cached by the engine.
func (in *Input) value(cluster, usage *ast.Term) ast.Value {
	items := [][2]*ast.Term{
		{key("work"), ast.NewTerm(in.Work.value())},
		{key("cluster"), cluster},
		{key("usage"), usage},
	}
	if len(in.Placement) > 0 {
		ts := make([]*ast.Term, len(in.Placement))
		for i, p := range in.Placement {
			po := [][2]*ast.Term{
				{key("node"), ast.StringTerm(p.Node)},
				{key("role"), ast.StringTerm(p.Role)},
				{key("cpus"), floatTerm(p.CPUs)},
				{key("memory_mb"), intTerm(p.MemoryMB)},
			}
			if p.Count != 0 {
				po = append(po, [2]*ast.Term{key("count"), intTerm(p.Count)})
			}
			if len(p.GPUs) > 0 {
				gs := make([]*ast.Term, len(p.GPUs))
				for j, g := range p.GPUs {
					gs[j] = ast.ObjectTerm(
						[2]*ast.Term{key("index"), intTerm(g.Index)},
						[2]*ast.Term{key("share"), floatTerm(g.Share)},
					)
				}
				po = append(po, [2]*ast.Term{key("gpus"), ast.ArrayTerm(gs...)})
			}
			ts[i] = ast.ObjectTerm(po...)
		}
		items = append(items, [2]*ast.Term{key("placement"), ast.ArrayTerm(ts...)})
	}
	return ast.NewObject(items...)
}

func (w *Work) value() ast.Object {
	items := make([][2]*ast.Term, 0, 8)
	items = append(items,
		[2]*ast.Term{key("id"), ast.StringTerm(w.ID)},
		[2]*ast.Term{key("kind"), ast.StringTerm(w.Kind)},
		[2]*ast.Term{key("trains"), ast.BooleanTerm(w.Trains)},
		[2]*ast.Term{key("priority"), intTerm(w.Priority)},
		[2]*ast.Term{key("waiting_seconds"), intTerm(w.WaitingSeconds)},
	)
	if w.Config != "" {
		items = append(items, [2]*ast.Term{key("config"), ast.StringTerm(w.Config)})
	}
	if w.Board != "" {
		items = append(items, [2]*ast.Term{key("board"), ast.StringTerm(w.Board)})
	}
	roles := make([]*ast.Term, len(w.Roles))
	for i, r := range w.Roles {
		ro := [][2]*ast.Term{
			{key("name"), ast.StringTerm(r.Name)},
			{key("count"), intTerm(r.Count)},
			{key("cpus"), floatTerm(r.CPUs)},
			{key("gpus"), floatTerm(r.GPUs)},
			{key("memory_mb"), intTerm(r.MemoryMB)},
		}
		if r.MinVRAMMB != 0 {
			ro = append(ro, [2]*ast.Term{key("min_vram_mb"), intTerm(r.MinVRAMMB)})
		}
		roles[i] = ast.ObjectTerm(ro...)
	}
	items = append(items, [2]*ast.Term{key("roles"), arrayOrNull(roles, w.Roles == nil)})
	if w.Providers != nil {
		var po [][2]*ast.Term
		if len(w.Providers.Prefer) > 0 {
			po = append(po, [2]*ast.Term{key("prefer"), stringsTerm(w.Providers.Prefer)})
		}
		if len(w.Providers.Avoid) > 0 {
			po = append(po, [2]*ast.Term{key("avoid"), stringsTerm(w.Providers.Avoid)})
		}
		items = append(items, [2]*ast.Term{key("providers"), ast.ObjectTerm(po...)})
	}
	if c := w.Capabilities; c != nil {
		items = append(items, [2]*ast.Term{key("capabilities"), ast.ObjectTerm(
			[2]*ast.Term{key("http"), stringsOrNull(c.HTTP)},
			[2]*ast.Term{key("http_rate"), floatTerm(c.HTTPRate)},
		)})
	}
	if len(w.PluginCapabilities) > 0 {
		items = append(items, [2]*ast.Term{key("plugin_capabilities"), stringsTerm(w.PluginCapabilities)})
	}
	return ast.NewObject(items...)
}

// clusterValue is the cluster document: the nodes as given plus a summary
// aggregated here, once per fleet state, so that the admission rules read a
// few numbers instead of scanning every node and GPU on each decision.
func clusterValue(c Cluster) *ast.Term {
	items := [][2]*ast.Term{
		{key("nodes"), nodesTerm(c.Nodes)},
		{key("summary"), summaryTerm(c.Nodes)},
	}
	if len(c.Endpoints) > 0 {
		eps := make([]*ast.Term, len(c.Endpoints))
		for i, e := range c.Endpoints {
			eps[i] = ast.ObjectTerm(
				[2]*ast.Term{key("name"), ast.StringTerm(e.Name)},
				[2]*ast.Term{key("nodes"), stringsOrNull(e.Nodes)},
				[2]*ast.Term{key("gpus"), intTerm(e.GPUs)},
			)
		}
		items = append(items, [2]*ast.Term{key("endpoints"), ast.ArrayTerm(eps...)})
	}
	return ast.ObjectTerm(items...)
}

// stringsOrNull is stringsTerm, with null for a nil slice (as JSON).
func stringsOrNull(xs []string) *ast.Term {
	if xs == nil {
		return ast.NullTerm()
	}
	return stringsTerm(xs)
}

// summary is input.cluster.summary:
//
//	max_gpu_vram_mb  largest GPU of any node (0 without GPUs)
//	gpus             GPUs in the cluster
//	shapes           node capacities no other node beats in both CPUs and
//	                 memory, as {cpus, memory_mb}, fewest CPUs first: a role
//	                 that fits some node fits one of these
//	providers        distinct non-empty providers, sorted
//	devices          every GPU as {key, vram_mb, rank}, in
//	                 node order (see device)
//	ranks            per rank r (index), the GPUs of that rank and the
//	                 largest of them, as {gpus, max_vram_mb}: with GPUs
//	                 reserved per node, the unreserved ones in a few steps
//
// It only condenses the nodes; everything that depends on policy data
// (reserved GPUs, capacity share, tiers) stays in Rego. fixtures_test.rego
// computes the same document for the Rego tests (TestSummaryMatchesRego).
type summary struct {
	MaxGPUVRAMMB int      `json:"max_gpu_vram_mb"`
	GPUs         int      `json:"gpus"`
	Shapes       []shape  `json:"shapes"`
	Providers    []string `json:"providers"`
	Devices      []device `json:"devices"`
	Ranks        []rank   `json:"ranks"`
}

// rank totals the GPUs of one rank across the nodes.
type rank struct {
	GPUs      int `json:"gpus"`
	MaxVRAMMB int `json:"max_vram_mb"`
}

// device is one GPU of the cluster. Key is "node:index", the form
// gpu_preservation.reserved lists; Rank counts the node's GPUs with a lower
// index, so reserving the lowest N per node is rank < N.
type device struct {
	Key    string `json:"key"`
	VRAMMB int    `json:"vram_mb"`
	Rank   int    `json:"rank"`
}

type shape struct {
	CPUs     float64 `json:"cpus"`
	MemoryMB int64   `json:"memory_mb"`
}

func summarize(nodes []Node) summary {
	s := summary{Shapes: paretoShapes(nodes), Providers: make([]string, 0, 4), Devices: []device{}, Ranks: []rank{}}
	for _, n := range nodes {
		s.GPUs += len(n.GPUs)
		for _, g := range n.GPUs {
			s.MaxGPUVRAMMB = max(s.MaxGPUVRAMMB, g.VRAMMB)
			r := 0
			for _, o := range n.GPUs {
				if o.Index < g.Index {
					r++
				}
			}
			s.Devices = append(s.Devices, device{Key: n.Name + ":" + strconv.Itoa(g.Index), VRAMMB: g.VRAMMB, Rank: r})
			for len(s.Ranks) <= r {
				s.Ranks = append(s.Ranks, rank{})
			}
			s.Ranks[r].GPUs++
			s.Ranks[r].MaxVRAMMB = max(s.Ranks[r].MaxVRAMMB, g.VRAMMB)
		}
		if n.Provider != "" && !slices.Contains(s.Providers, n.Provider) {
			s.Providers = append(s.Providers, n.Provider)
		}
	}
	sort.Strings(s.Providers)
	return s
}

func summaryTerm(nodes []Node) *ast.Term {
	s := summarize(nodes)
	shapes := make([]*ast.Term, len(s.Shapes))
	for i, sh := range s.Shapes {
		shapes[i] = ast.ObjectTerm(
			[2]*ast.Term{key("cpus"), floatTerm(sh.CPUs)},
			[2]*ast.Term{key("memory_mb"), intTerm(sh.MemoryMB)},
		)
	}
	return ast.ObjectTerm(
		[2]*ast.Term{key("max_gpu_vram_mb"), intTerm(s.MaxGPUVRAMMB)},
		[2]*ast.Term{key("gpus"), intTerm(s.GPUs)},
		[2]*ast.Term{key("shapes"), ast.ArrayTerm(shapes...)},
		[2]*ast.Term{key("providers"), stringsTerm(s.Providers)},
		[2]*ast.Term{key("devices"), devicesTerm(s.Devices)},
		[2]*ast.Term{key("ranks"), ranksTerm(s.Ranks)},
	)
}

func ranksTerm(rs []rank) *ast.Term {
	ts := make([]*ast.Term, len(rs))
	for i, r := range rs {
		ts[i] = ast.ObjectTerm(
			[2]*ast.Term{key("gpus"), intTerm(r.GPUs)},
			[2]*ast.Term{key("max_vram_mb"), intTerm(r.MaxVRAMMB)},
		)
	}
	return ast.ArrayTerm(ts...)
}

func devicesTerm(ds []device) *ast.Term {
	ts := make([]*ast.Term, len(ds))
	for i, d := range ds {
		ts[i] = ast.ObjectTerm(
			[2]*ast.Term{key("key"), ast.StringTerm(d.Key)},
			[2]*ast.Term{key("vram_mb"), intTerm(d.VRAMMB)},
			[2]*ast.Term{key("rank"), intTerm(d.Rank)},
		)
	}
	return ast.ArrayTerm(ts...)
}

// paretoShapes keeps the Pareto-maximal (CPUs, memory) node capacities,
// fewest CPUs first.
func paretoShapes(nodes []Node) []shape {
	all := make([]shape, len(nodes))
	for i, n := range nodes {
		all[i] = shape{n.CPUs, n.MemoryMB}
	}
	// Most CPUs first (then most memory): a shape survives when it has more
	// memory than every shape before it, which all have at least its CPUs.
	slices.SortFunc(all, func(a, b shape) int {
		if c := cmp.Compare(b.CPUs, a.CPUs); c != 0 {
			return c
		}
		return cmp.Compare(b.MemoryMB, a.MemoryMB)
	})
	keep := make([]shape, 0, 4)
	for _, s := range all {
		if len(keep) == 0 || s.MemoryMB > keep[len(keep)-1].MemoryMB {
			keep = append(keep, s)
		}
	}
	slices.Reverse(keep)
	return keep
}

func nodesTerm(nodes []Node) *ast.Term {
	ts := make([]*ast.Term, len(nodes))
	for i, n := range nodes {
		no := [][2]*ast.Term{
			{key("name"), ast.StringTerm(n.Name)},
			{key("cpus"), floatTerm(n.CPUs)},
			{key("memory_mb"), intTerm(n.MemoryMB)},
			{key("used"), ast.ObjectTerm(
				[2]*ast.Term{key("cpus"), floatTerm(n.Used.CPUs)},
				[2]*ast.Term{key("memory_mb"), intTerm(n.Used.MemoryMB)},
			)},
		}
		if n.Provider != "" {
			no = append(no, [2]*ast.Term{key("provider"), ast.StringTerm(n.Provider)})
		}
		if n.Ephemeral {
			no = append(no, [2]*ast.Term{key("ephemeral"), ast.BooleanTerm(true)})
		}
		if len(n.GPUs) > 0 {
			gs := make([]*ast.Term, len(n.GPUs))
			for j, g := range n.GPUs {
				gs[j] = ast.ObjectTerm(
					[2]*ast.Term{key("index"), intTerm(g.Index)},
					[2]*ast.Term{key("vram_mb"), intTerm(g.VRAMMB)},
				)
			}
			no = append(no, [2]*ast.Term{key("gpus"), ast.ArrayTerm(gs...)})
		}
		ts[i] = ast.ObjectTerm(no...)
	}
	return arrayOrNull(ts, nodes == nil)
}

// usageValue is the usage document plus tier1_share_by_config, each
// config's Tier-1 GPU seconds over the capacity (when there is capacity):
// dividing in Go spares the quota rule OPA's arbitrary-precision division,
// the costliest step of a decision.
func usageValue(u Usage) *ast.Term {
	items := [][2]*ast.Term{{key("tier1_capacity_seconds"), floatTerm(u.Tier1CapacitySeconds)}}
	if len(u.Tier1GPUSecondsByConfig) > 0 {
		ks := sortedKeys(u.Tier1GPUSecondsByConfig)
		secs := make([][2]*ast.Term, len(ks))
		for i, k := range ks {
			secs[i] = [2]*ast.Term{ast.StringTerm(k), floatTerm(u.Tier1GPUSecondsByConfig[k])}
		}
		items = append(items, [2]*ast.Term{key("tier1_gpu_seconds_by_config"), ast.ObjectTerm(secs...)})
		if shares := tier1Shares(u); shares != nil {
			ss := make([][2]*ast.Term, len(ks))
			for i, k := range ks {
				ss[i] = [2]*ast.Term{secs[i][0], floatTerm(shares[k])}
			}
			items = append(items, [2]*ast.Term{key("tier1_share_by_config"), ast.ObjectTerm(ss...)})
		}
	}
	if len(u.RunningTrainingByConfig) > 0 {
		ks := sortedKeys(u.RunningTrainingByConfig)
		m := make([][2]*ast.Term, len(ks))
		for i, k := range ks {
			m[i] = [2]*ast.Term{ast.StringTerm(k), intTerm(u.RunningTrainingByConfig[k])}
		}
		items = append(items, [2]*ast.Term{key("running_training_by_config"), ast.ObjectTerm(m...)})
	}
	return ast.ObjectTerm(items...)
}

// tier1Shares is each config's share of the Tier-1 capacity; nil without
// capacity or usage.
func tier1Shares(u Usage) map[string]float64 {
	if u.Tier1CapacitySeconds <= 0 || len(u.Tier1GPUSecondsByConfig) == 0 {
		return nil
	}
	shares := make(map[string]float64, len(u.Tier1GPUSecondsByConfig))
	for k, v := range u.Tier1GPUSecondsByConfig {
		shares[k] = v / u.Tier1CapacitySeconds
	}
	return shares
}

// The cluster and usage documents as the Wasm evaluator takes them, JSON
// of the same shape clusterValue and usageValue build as terms
// (TestValueMatchesJSON compares them).
type usageDoc struct {
	Usage
	Tier1ShareByConfig map[string]float64 `json:"tier1_share_by_config,omitempty"`
}

// clusterJSON is written out by hand rather than by encoding/json: it is
// rebuilt whenever the fleet changes, and reflection took ~35 µs of such a
// decision on the seed-002 fleet.
func clusterJSON(c Cluster) []byte {
	b, _ := clusterJSONSplit(c)
	return b
}

// clusterJSONSplit is clusterJSON and the offset of the comma after the
// nodes array, which comes first: b[len(`{"nodes":`):end] is the array,
// and b[end:] with its comma made a brace the rest of the document.
func clusterJSONSplit(c Cluster) (b []byte, end int) {
	b = make([]byte, 0, 384*len(c.Nodes)+512) // ~280 bytes a GPU node on seed 002
	b = append(b, `{"nodes":`...)
	b = appendJSONArray(b, c.Nodes, c.Nodes == nil, appendNodeJSON)
	end = len(b)
	s := summarize(c.Nodes)
	b = append(b, `,"summary":{"max_gpu_vram_mb":`...)
	b = strconv.AppendInt(b, int64(s.MaxGPUVRAMMB), 10)
	b = append(b, `,"gpus":`...)
	b = strconv.AppendInt(b, int64(s.GPUs), 10)
	b = append(b, `,"shapes":`...)
	b = appendJSONArray(b, s.Shapes, false, func(b []byte, sh shape) []byte {
		b = append(b, `{"cpus":`...)
		b = appendJSONFloat(b, sh.CPUs)
		b = append(b, `,"memory_mb":`...)
		return append(strconv.AppendInt(b, sh.MemoryMB, 10), '}')
	})
	b = append(b, `,"providers":`...)
	b = appendJSONArray(b, s.Providers, false, appendJSONString)
	b = append(b, `,"devices":`...)
	b = appendJSONArray(b, s.Devices, false, func(b []byte, d device) []byte {
		b = append(b, `{"key":`...)
		b = appendJSONString(b, d.Key)
		b = append(b, `,"vram_mb":`...)
		b = strconv.AppendInt(b, int64(d.VRAMMB), 10)
		b = append(b, `,"rank":`...)
		return append(strconv.AppendInt(b, int64(d.Rank), 10), '}')
	})
	b = append(b, `,"ranks":`...)
	b = appendJSONArray(b, s.Ranks, false, func(b []byte, r rank) []byte {
		b = append(b, `{"gpus":`...)
		b = strconv.AppendInt(b, int64(r.GPUs), 10)
		b = append(b, `,"max_vram_mb":`...)
		return append(strconv.AppendInt(b, int64(r.MaxVRAMMB), 10), '}')
	})
	b = append(b, '}')
	if len(c.Endpoints) > 0 {
		b = append(b, `,"endpoints":`...)
		b = appendJSONArray(b, c.Endpoints, false, func(b []byte, e Endpoint) []byte {
			b = append(b, `{"name":`...)
			b = appendJSONString(b, e.Name)
			b = append(b, `,"nodes":`...)
			b = appendJSONArray(b, e.Nodes, e.Nodes == nil, appendJSONString)
			b = append(b, `,"gpus":`...)
			return append(strconv.AppendInt(b, int64(e.GPUs), 10), '}')
		})
	}
	return append(b, '}'), end
}

// restJSON is the input's work and placement as the Wasm module parses
// them each decision: {"work":…,"placement":…}, written as encoding/json
// writes that struct (TestRestJSONIsEncodingJSON), by hand for the same
// reason as clusterJSON (it was 1.4 µs and two allocations a decision).
func restJSON(b []byte, w *Work, placement []Placed) []byte {
	b = append(b, `{"work":{"id":`...)
	b = appendJSONString(b, w.ID)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, w.Kind)
	b = append(b, `,"trains":`...)
	b = strconv.AppendBool(b, w.Trains)
	if w.Config != "" {
		b = append(b, `,"config":`...)
		b = appendJSONString(b, w.Config)
	}
	if w.Board != "" {
		b = append(b, `,"board":`...)
		b = appendJSONString(b, w.Board)
	}
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(w.Priority), 10)
	b = append(b, `,"waiting_seconds":`...)
	b = strconv.AppendInt(b, w.WaitingSeconds, 10)
	b = append(b, `,"roles":`...)
	b = appendJSONArray(b, w.Roles, w.Roles == nil, func(b []byte, r Role) []byte {
		b = append(b, `{"name":`...)
		b = appendJSONString(b, r.Name)
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, int64(r.Count), 10)
		b = append(b, `,"cpus":`...)
		b = appendJSONFloat(b, r.CPUs)
		b = append(b, `,"gpus":`...)
		b = appendJSONFloat(b, r.GPUs)
		b = append(b, `,"memory_mb":`...)
		b = strconv.AppendInt(b, r.MemoryMB, 10)
		if r.MinVRAMMB != 0 {
			b = append(b, `,"min_vram_mb":`...)
			b = strconv.AppendInt(b, int64(r.MinVRAMMB), 10)
		}
		return append(b, '}')
	})
	if p := w.Providers; p != nil {
		b = append(b, `,"providers":{`...)
		sep := ""
		if len(p.Prefer) > 0 {
			b = append(b, `"prefer":`...)
			b = appendJSONArray(b, p.Prefer, false, appendJSONString)
			sep = ","
		}
		if len(p.Avoid) > 0 {
			b = append(append(b, sep...), `"avoid":`...)
			b = appendJSONArray(b, p.Avoid, false, appendJSONString)
		}
		b = append(b, '}')
	}
	if c := w.Capabilities; c != nil {
		b = append(b, `,"capabilities":{"http":`...)
		b = appendJSONArray(b, c.HTTP, c.HTTP == nil, appendJSONString)
		b = append(b, `,"http_rate":`...)
		b = append(appendJSONFloat(b, c.HTTPRate), '}')
	}
	if len(w.PluginCapabilities) > 0 {
		b = append(b, `,"plugin_capabilities":`...)
		b = appendJSONArray(b, w.PluginCapabilities, false, appendJSONString)
	}
	b = append(b, '}')
	if len(placement) > 0 {
		b = append(b, `,"placement":`...)
		b = appendJSONArray(b, placement, false, func(b []byte, p Placed) []byte {
			b = append(b, `{"node":`...)
			b = appendJSONString(b, p.Node)
			b = append(b, `,"role":`...)
			b = appendJSONString(b, p.Role)
			if p.Count != 0 {
				b = append(b, `,"count":`...)
				b = strconv.AppendInt(b, int64(p.Count), 10)
			}
			b = append(b, `,"cpus":`...)
			b = appendJSONFloat(b, p.CPUs)
			b = append(b, `,"memory_mb":`...)
			b = strconv.AppendInt(b, p.MemoryMB, 10)
			if len(p.GPUs) > 0 {
				b = append(b, `,"gpus":`...)
				b = appendJSONArray(b, p.GPUs, false, func(b []byte, g PlacedGPU) []byte {
					b = append(b, `{"index":`...)
					b = strconv.AppendInt(b, int64(g.Index), 10)
					b = append(b, `,"share":`...)
					return append(appendJSONFloat(b, g.Share), '}')
				})
			}
			return append(b, '}')
		})
	}
	return append(b, '}')
}

// appendNodeJSON writes a Node as encoding/json would (same fields and
// omitempty rules).
func appendNodeJSON(b []byte, n Node) []byte {
	b = append(b, `{"name":`...)
	b = appendJSONString(b, n.Name)
	if n.Provider != "" {
		b = append(b, `,"provider":`...)
		b = appendJSONString(b, n.Provider)
	}
	if n.Ephemeral {
		b = append(b, `,"ephemeral":true`...)
	}
	b = append(b, `,"cpus":`...)
	b = appendJSONFloat(b, n.CPUs)
	b = append(b, `,"memory_mb":`...)
	b = strconv.AppendInt(b, n.MemoryMB, 10)
	if len(n.GPUs) > 0 {
		b = append(b, `,"gpus":`...)
		b = appendJSONArray(b, n.GPUs, false, func(b []byte, g GPU) []byte {
			b = append(b, `{"index":`...)
			b = strconv.AppendInt(b, int64(g.Index), 10)
			b = append(b, `,"vram_mb":`...)
			return append(strconv.AppendInt(b, int64(g.VRAMMB), 10), '}')
		})
	}
	b = append(b, `,"used":`...)
	return append(appendUsedJSON(b, n.Used), '}')
}

func appendUsedJSON(b []byte, u Used) []byte {
	b = append(b, `{"cpus":`...)
	b = appendJSONFloat(b, u.CPUs)
	b = append(b, `,"memory_mb":`...)
	b = strconv.AppendInt(b, u.MemoryMB, 10)
	return append(b, '}')
}

// usedChanges lists the nodes of next that differ from prev only in what
// they use (placements started or ended), or reports false when anything
// else differs: a node joined or left, a capacity or an endpoint changed.
// Only then must the cluster document, summary included (which reads
// capacities alone), be rebuilt.
func usedChanges(prev, next *Cluster) ([]int, bool) {
	if len(prev.Nodes) != len(next.Nodes) || !slices.EqualFunc(prev.Endpoints, next.Endpoints, func(a, b Endpoint) bool {
		return a.Name == b.Name && a.GPUs == b.GPUs && slices.Equal(a.Nodes, b.Nodes) && (a.Nodes == nil) == (b.Nodes == nil)
	}) {
		return nil, false
	}
	var changed []int
	for i, p := range prev.Nodes {
		n := next.Nodes[i]
		if p.Name != n.Name || p.Provider != n.Provider || p.Ephemeral != n.Ephemeral || p.CPUs != n.CPUs || p.MemoryMB != n.MemoryMB || !slices.Equal(p.GPUs, n.GPUs) {
			return nil, false
		}
		if p.Used != n.Used {
			changed = append(changed, i)
		}
	}
	return changed, true
}

// appendJSONArray writes xs as a JSON array (null when null is set, as
// encoding/json writes a nil slice), each element by elem.
func appendJSONArray[T any](b []byte, xs []T, null bool, elem func([]byte, T) []byte) []byte {
	if null {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, x)
	}
	return append(b, ']')
}

// appendJSONString quotes printable ASCII directly and leaves anything
// else (escapes, control characters, UTF-8) to encoding/json.
func appendJSONString(b []byte, x string) []byte {
	for i := 0; i < len(x); i++ {
		if c := x[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			q, _ := json.Marshal(x) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, x...)
	return append(b, '"')
}

// appendJSONFloat formats like encoding/json (checkInput has refused NaN
// and infinities): plain notation, exponent only for very small or large
// magnitudes, without a leading zero in the exponent.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-07 -> e-7, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// usageJSON is the usage document, written by hand like clusterJSON: with
// live usage every decision brings a new one, and encoding/json's
// reflection and map sorting took ~5 µs of it (TestUsageJSONIsEncodingJSON
// holds it to encoding/json's bytes).
func usageJSON(u Usage) ([]byte, error) {
	b := make([]byte, 0, 64+64*(2*len(u.Tier1GPUSecondsByConfig)+len(u.RunningTrainingByConfig)))
	b = append(b, `{"tier1_capacity_seconds":`...)
	b = appendJSONFloat(b, u.Tier1CapacitySeconds)
	b = appendJSONMap(b, "tier1_gpu_seconds_by_config", u.Tier1GPUSecondsByConfig, appendJSONFloat)
	b = appendJSONMap(b, "running_training_by_config", u.RunningTrainingByConfig, func(b []byte, n int) []byte { return strconv.AppendInt(b, int64(n), 10) })
	b = appendJSONMap(b, "tier1_share_by_config", tier1Shares(u), appendJSONFloat)
	return append(b, '}'), nil
}

// appendJSONMap writes `,"name":{...}` with sorted keys, or nothing for an
// empty map (omitempty).
func appendJSONMap[V any](b []byte, name string, m map[string]V, elem func([]byte, V) []byte) []byte {
	if len(m) == 0 {
		return b
	}
	b = append(append(append(b, `,"`...), name...), `":{`...)
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendJSONString(b, k), ':')
		b = elem(b, m[k])
	}
	return append(b, '}')
}

// keyTerms are the input's object keys, shared by every decision (OPA never
// modifies input terms).
var keyTerms = func() map[string]*ast.Term {
	m := map[string]*ast.Term{}
	for _, k := range []string{
		"work", "cluster", "usage", "placement",
		"id", "kind", "trains", "config", "board", "priority", "waiting_seconds", "roles", "providers", "prefer", "avoid",
		"name", "count", "cpus", "gpus", "memory_mb", "min_vram_mb",
		"nodes", "summary", "provider", "ephemeral", "used", "index", "vram_mb",
		"max_gpu_vram_mb", "shapes", "devices", "key", "rank",
		"tier1_capacity_seconds", "tier1_gpu_seconds_by_config", "tier1_share_by_config", "running_training_by_config",
		"node", "role", "share",
	} {
		m[k] = ast.StringTerm(k)
	}
	return m
}()

func key(k string) *ast.Term {
	if t, ok := keyTerms[k]; ok {
		return t
	}
	return ast.StringTerm(k)
}

func intTerm[T int | int64](n T) *ast.Term { return ast.InternedTerm(int(n)) }

// floatTerm writes whole numbers as integers (as encoding/json does, and
// interned when small); others as FloatNumberTerm.
func floatTerm(f float64) *ast.Term {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return ast.InternedTerm(int(f))
	}
	return ast.FloatNumberTerm(f)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func stringsTerm(xs []string) *ast.Term {
	ts := make([]*ast.Term, len(xs))
	for i, x := range xs {
		ts[i] = ast.StringTerm(x)
	}
	return ast.ArrayTerm(ts...)
}

// arrayOrNull matches encoding/json: a nil slice encodes as null.
func arrayOrNull(ts []*ast.Term, isNil bool) *ast.Term {
	if isNil {
		return ast.NullTerm()
	}
	return ast.ArrayTerm(ts...)
}
