package policy

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/trainyard/trainyard/internal/policy/params"
)

// Query is the admission package every bundle must define.
const Query = "data.trainyard.admission"

// Engine evaluates one bundle. The query is prepared once; Decide is safe
// for concurrent use.
type Engine struct {
	bundle   Bundle
	revision string
	params   params.Params
	query    rego.PreparedEvalQuery
	order    rego.PreparedEvalQuery
	// lastCluster and lastUsage cache the latest cluster and usage terms
	// by content hash (see input).
	lastCluster atomic.Pointer[cachedTerm]
	lastUsage   atomic.Pointer[cachedTerm]
}

type cachedTerm struct {
	sum  [32]byte
	term *ast.Term
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
	return &Engine{bundle: b, revision: rev, params: p, query: q, order: order}, nil
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

// Violation is one denied rule with its human reason.
type Violation struct {
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
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
	val, hash, err := e.input(&in)
	if err != nil {
		return Decision{}, err
	}
	// No OPA metrics: a fresh set of timers per decision was measurable
	// and nothing reads them.
	rs, err := e.query.Eval(ctx, rego.EvalParsedInput(val), rego.EvalMetrics(metrics.NoOp()))
	if err != nil {
		return Decision{}, fmt.Errorf("evaluate %s (revision %s): %w", Query, e.revision, err)
	}
	if len(rs) != 1 {
		return Decision{}, fmt.Errorf("evaluate %s (revision %s): %d results, want 1 (is allow/deny defined?)", Query, e.revision, len(rs))
	}
	d := Decision{Revision: e.revision, InputHash: hash}
	b := rs[0].Bindings
	allow, ok := b["allow"].(bool)
	if !ok {
		return Decision{}, fmt.Errorf("evaluate %s: allow is %T, want bool", Query, b["allow"])
	}
	d.Allow = allow
	denies, _ := b["deny"].([]any)
	for _, x := range denies {
		m, _ := x.(map[string]any)
		rule, _ := m["rule"].(string)
		reason, _ := m["reason"].(string)
		if rule == "" {
			return Decision{}, fmt.Errorf("evaluate %s: deny entry %v lacks a rule", Query, x)
		}
		d.Violations = append(d.Violations, Violation{Rule: rule, Reason: reason})
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
	d.Priority = in.Work.Priority
	if ps, _ := b["priority"].([]any); len(ps) == 1 {
		if n, ok := ps[0].(json.Number); ok {
			if v, err := n.Int64(); err == nil {
				d.Priority = int(v)
			}
		}
	}
	return d, nil
}

// input builds the AST input and the input hash. The cluster and usage
// terms are reused while their content is unchanged: decisions come in
// bursts against the same fleet and usage, and building those terms is a
// large share of a decision. The hash is SHA-256 over a binary encoding of
// every input field (see hash.go); only its first 16 bytes are kept.
func (e *Engine) input(in *Input) (ast.Value, string, error) {
	if err := checkFinite(in); err != nil {
		return nil, "", fmt.Errorf("admission input: %w", err)
	}
	enc := getEncoder()
	defer putEncoder(enc)
	csum := enc.sum(func(b []byte) []byte { return appendCluster(b, &in.Cluster) })
	ct := e.lastCluster.Load()
	if ct == nil || ct.sum != csum {
		ct = &cachedTerm{sum: csum, term: clusterValue(in.Cluster)}
		e.lastCluster.Store(ct)
	}
	usum := enc.sum(func(b []byte) []byte { return appendUsage(b, &in.Usage) })
	ut := e.lastUsage.Load()
	if ut == nil || ut.sum != usum {
		ut = &cachedTerm{sum: usum, term: usageValue(in.Usage)}
		e.lastUsage.Store(ut)
	}
	h := enc.sum(func(b []byte) []byte {
		b = append(append(b, csum[:]...), usum[:]...)
		b = appendWork(b, &in.Work)
		return appendPlacement(b, in.Placement)
	})
	return in.value(ct.term, ut.term), hex.EncodeToString(h[:16]), nil
}

// ProviderOrder ranks the cluster's providers for the input's work kind
// (data.trainyard.admission.provider_order): preferred first, the rest
// cheapest first, avoided ones left out.
func (e *Engine) ProviderOrder(ctx context.Context, in Input) ([]string, error) {
	val, _, err := e.input(&in)
	if err != nil {
		return nil, err
	}
	rs, err := e.order.Eval(ctx, rego.EvalParsedInput(val))
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
