package policy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/trainyard/trainyard/internal/policy/params"
)

// Query is the admission package every bundle must define.
const Query = "data.trainyard.admission"

// Engine evaluates one bundle. Decisions run the bundle compiled to Wasm
// (wasm.go); the interpreter's query is prepared too, as the reference and
// for bundles that do not compile to Wasm. Decide is safe for concurrent
// use.
type Engine struct {
	bundle   Bundle
	revision string
	params   params.Params
	query    rego.PreparedEvalQuery
	order    rego.PreparedEvalQuery
	// wasm is nil when the bundle could not be compiled to Wasm; wasmErr
	// says why.
	wasm    *wasmEvaluator
	wasmErr error
	// lastCluster and lastUsage cache the latest cluster and usage terms
	// by content hash (see input).
	lastCluster atomic.Pointer[document]
	lastUsage   atomic.Pointer[document]
}

// document is a cluster or usage document with its content hash: an OPA
// term for the interpreter, JSON for the Wasm module, each built once on
// first use.
type document struct {
	enc  []byte // the binary encoding of its content (hash.go)
	sum  [32]byte
	term func() *ast.Term
	// json is a usage document's JSON. A cluster document has cluster
	// instead, the fleet it was built from: Wasm VMs parse its JSON in two
	// parts and patch what changed (wasmVM.cacheDocuments).
	json    func() ([]byte, error)
	cluster *Cluster
}

// New compiles the bundle's policy modules (tests excluded) and prepares
// the admission query.
func New(ctx context.Context, b Bundle) (*Engine, error) {
	rev := b.Revision()
	p, err := params.FromData(b.Data)
	if err != nil {
		return nil, fmt.Errorf("policy bundle %s: %w", rev, err)
	}
	data, err := roundTrip(b.Data)
	if err != nil {
		return nil, fmt.Errorf("policy bundle %s: data: %w", rev, err)
	}
	opts := []func(*rego.Rego){
		rego.Query(`allow := ` + Query + `.allow
deny := ` + Query + `.deny
priority := [p | p := ` + Query + `.priority]`),
	}
	base := []func(*rego.Rego){
		rego.Store(inmem.NewFromObjectWithOpts(data, inmem.OptReturnASTValuesOnRead(true))),
		rego.SetRegoVersion(ast.RegoV1),
	}
	n := 0
	for path, src := range b.Modules {
		if IsTest(path) {
			continue
		}
		base = append(base, rego.Module(path, src))
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("policy bundle %s: no policy modules", rev)
	}
	q, err := rego.New(append(opts, base...)...).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("policy bundle %s: prepare: %w", rev, err)
	}
	// The provider ranking is advice for placement, not admission; it is a
	// separate query so decisions do not pay for its sort.
	order, err := rego.New(append([]func(*rego.Rego){rego.Query(`order := [o | o := ` + Query + `.provider_order]`)}, base...)...).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("policy bundle %s: prepare provider order: %w", rev, err)
	}
	e := &Engine{bundle: b, revision: rev, params: p, query: q, order: order}
	e.wasm, e.wasmErr = newWasmEvaluator(ctx, b, data)
	return e, nil
}

// roundTrip turns data into the plain JSON types OPA's store expects.
func roundTrip(v map[string]any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return out, dec.Decode(&out)
}

// Revision is the bundle hash.
func (e *Engine) Revision() string { return e.revision }

// Bundle is the loaded bundle.
func (e *Engine) Bundle() Bundle { return e.bundle }

// Params are the bundle's data params (for the scheduler).
func (e *Engine) Params() params.Params { return e.params }

// Evaluator names what decides: "wasm" (the bundle compiled to Wasm), or
// "topdown" (OPA's interpreter) with why the bundle did not compile.
func (e *Engine) Evaluator() string {
	if e.wasm != nil {
		return "wasm"
	}
	return "topdown (not compiled to wasm: " + e.wasmErr.Error() + ")"
}

// Violation is one denied rule with its human reason. Waits marks a rule
// decided on the live usage (a deny entry with "waits": true): work it
// denies is accepted and waits in the cluster's queue until usage changes,
// instead of being refused.
type Violation struct {
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
	Waits  bool   `json:"waits,omitempty"`
}

// Decision is the admission result.
type Decision struct {
	Allow      bool        `json:"allow"`
	Violations []Violation `json:"violations,omitempty"`
	// Priority is the effective priority (starvation boost applied).
	Priority  int    `json:"priority"`
	Revision  string `json:"revision"`
	InputHash string `json:"input_hash"`
}

// Decide evaluates the admission policy on one input.
func (e *Engine) Decide(ctx context.Context, in Input) (Decision, error) {
	return e.decide(ctx, in, e.wasm != nil)
}

// decide evaluates with the Wasm module or with the interpreter; both give
// the same bindings (allow, deny, priority), read by one function.
func (e *Engine) decide(ctx context.Context, in Input, useWasm bool) (Decision, error) {
	p, err := e.input(&in, useWasm)
	if err != nil {
		return Decision{}, err
	}
	var v *verdict
	if useWasm {
		v, err = e.wasm.eval(ctx, wasmInput{rest: p.rest, cluster: p.cluster, usage: p.usage})
	} else {
		// No OPA metrics: a fresh set of timers per decision was
		// measurable and nothing reads them.
		var rs rego.ResultSet
		rs, err = e.query.Eval(ctx, rego.EvalParsedInput(in.value(p.cluster.term(), p.usage.term())), rego.EvalMetrics(metrics.NoOp()))
		if len(rs) == 1 {
			b := rs[0].Bindings
			v, err = (&bindings{Allow: b["allow"], Deny: b["deny"], Priority: b["priority"]}).verdict()
		} else if err == nil && len(rs) > 1 {
			err = fmt.Errorf("%d results, want 1", len(rs))
		}
	}
	if err == nil && v == nil {
		err = errors.New("no result (are allow and deny defined?)")
	}
	if err != nil {
		return Decision{}, fmt.Errorf("evaluate %s (revision %s): %w", Query, e.revision, err)
	}
	return e.decision(v, in.Work.Priority, p.hash)
}

// verdict is what a decision reads from either evaluator: allow, every
// denial, and the priority when the policy set one.
type verdict struct {
	allow      bool
	violations []Violation
	priority   *int64
}

// bindings are the interpreter's query variables, or the value of the
// Wasm module's entrypoint when it is not of the expected types (the same
// names). Sets come as arrays, numbers as json.Number.
type bindings struct {
	Allow    any `json:"allow"`
	Deny     any `json:"deny"`
	Priority any `json:"priority"`
}

// verdict checks the bindings' types.
func (b *bindings) verdict() (*verdict, error) {
	allow, ok := b.Allow.(bool)
	if !ok {
		return nil, fmt.Errorf("allow is %T, want bool", b.Allow)
	}
	v := &verdict{allow: allow}
	denies, _ := b.Deny.([]any)
	for _, x := range denies {
		m, _ := x.(map[string]any)
		rule, _ := m["rule"].(string)
		reason, _ := m["reason"].(string)
		waits, _ := m["waits"].(bool)
		v.violations = append(v.violations, Violation{Rule: rule, Reason: reason, Waits: waits})
	}
	if ps, _ := b.Priority.([]any); len(ps) == 1 {
		if n, ok := ps[0].(json.Number); ok {
			if p, err := n.Int64(); err == nil {
				v.priority = &p
			}
		}
	}
	return v, nil
}

// decision checks the verdict and completes it.
func (e *Engine) decision(v *verdict, basePriority int, hash string) (Decision, error) {
	d := Decision{Revision: e.revision, InputHash: hash, Allow: v.allow, Violations: v.violations}
	for _, x := range d.Violations {
		if x.Rule == "" {
			return Decision{}, fmt.Errorf("evaluate %s (revision %s): a deny entry lacks a rule (reason %q)", Query, e.revision, x.Reason)
		}
	}
	sort.Slice(d.Violations, func(i, j int) bool {
		a, b := d.Violations[i], d.Violations[j]
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return a.Reason < b.Reason
	})
	if len(d.Violations) > 0 && d.Allow {
		return Decision{}, fmt.Errorf("evaluate %s (revision %s): allow with %d denials: policy is inconsistent", Query, e.revision, len(d.Violations))
	}
	d.Priority = basePriority
	if v.priority != nil {
		d.Priority = int(*v.priority)
	}
	return d, nil
}

// prepared is a decision's input: the cluster and usage documents, the
// rest as JSON when the Wasm module decides, and the input hash.
type prepared struct {
	cluster, usage *document
	rest           []byte
	hash           string
}

// input prepares the input and the input hash. The cluster and usage
// documents are reused while their content is unchanged: decisions come
// in bursts against the same fleet and usage, and building those
// documents is a large share of a decision. The hash is SHA-256 over a
// binary encoding of every input field (see hash.go); only its first 16
// bytes are kept.
func (e *Engine) input(in *Input, useWasm bool) (prepared, error) {
	if err := checkInput(in); err != nil {
		return prepared{}, fmt.Errorf("admission input: %w", err)
	}
	enc := getEncoder()
	defer putEncoder(enc)
	enc.buf = appendCluster(enc.buf[:0], &in.Cluster)
	cd := cached(&e.lastCluster, enc.buf, func(d *document) {
		// A copy: the caller may reuse its slice, and the term and JSON
		// are built later, on first use.
		c := in.Cluster
		c.Nodes = slices.Clone(c.Nodes)
		d.cluster = &c
		d.term = sync.OnceValue(func() *ast.Term { return clusterValue(c) })
	})
	enc.buf = appendUsage(enc.buf[:0], &in.Usage)
	ud := cached(&e.lastUsage, enc.buf, func(d *document) {
		u := in.Usage
		d.term, d.json = sync.OnceValue(func() *ast.Term { return usageValue(u) }), sync.OnceValues(func() ([]byte, error) { return usageJSON(u) })
	})
	h := enc.sum(func(b []byte) []byte {
		b = append(append(b, cd.sum[:]...), ud.sum[:]...)
		b = appendWork(b, &in.Work)
		return appendPlacement(b, in.Placement)
	})
	p := prepared{cluster: cd, usage: ud, hash: hex.EncodeToString(h[:16])}
	if useWasm {
		// The same document the interpreter's term holds (value.go).
		p.rest = restJSON(make([]byte, 0, 256+128*len(in.Work.Roles)), &in.Work, in.Placement)
	}
	return p, nil
}

// cached returns slot's document when it was built from the same
// encoded content (compared, not hashed: the fleet mostly stays the same
// between decisions, and hashing it was a tenth of one); else a new one,
// hashed, completed by build and stored there.
func cached(slot *atomic.Pointer[document], encoded []byte, build func(*document)) *document {
	if d := slot.Load(); d != nil && bytes.Equal(d.enc, encoded) {
		return d
	}
	d := &document{enc: bytes.Clone(encoded), sum: sha256.Sum256(encoded)}
	build(d)
	slot.Store(d)
	return d
}

// ProviderOrder ranks the cluster's providers for the input's work kind
// (data.trainyard.admission.provider_order): preferred first, the rest
// cheapest first, avoided ones left out.
func (e *Engine) ProviderOrder(ctx context.Context, in Input) ([]string, error) {
	p, err := e.input(&in, false)
	if err != nil {
		return nil, err
	}
	rs, err := e.order.Eval(ctx, rego.EvalParsedInput(in.value(p.cluster.term(), p.usage.term())))
	if err != nil {
		return nil, fmt.Errorf("evaluate %s.provider_order: %w", Query, err)
	}
	var out []string
	if len(rs) == 1 {
		if os, _ := rs[0].Bindings["order"].([]any); len(os) == 1 {
			list, _ := os[0].([]any)
			for _, p := range list {
				if s, ok := p.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out, nil
}

// Summary is the denial as one line ("rule: reason; ...").
func (d Decision) Summary() string {
	if d.Allow {
		return "allowed"
	}
	parts := make([]string, len(d.Violations))
	for i, v := range d.Violations {
		parts[i] = v.Rule + ": " + v.Reason
	}
	return strings.Join(parts, "; ")
}
