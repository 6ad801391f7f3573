package pluginhost

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/trainyard/trainyard/internal/inference"
)

// The http capability: trainyard.http_request (docs/plugin-abi.md §9).
//
//	http_request(req_ptr, req_len, resp_ptr, resp_cap: i32) -> i64
//
// The request in guest memory is
//
//	u8 endpoint length | endpoint name | u16le path length | path | body
//
// (POST when body is non-empty, else GET). The plugin names an endpoint,
// never a URL or a key: the host resolves it, adds the credentials and
// retries. The result packs (code:i32 << 32 | n:u32): code is the HTTP
// status, or a negative HTTPCode* when the host refused or failed; n bytes
// of the response body, or of the error message, are at resp_ptr.

// Codes a refused or failed http_request returns (negated in the ABI).
const (
	HTTPCodeNotAllowed  = 2 // endpoint not declared by the plugin or not granted to the run
	HTTPCodeRateLimited = 3 // the run's rate limit would be exceeded within the call's deadline
	HTTPCodeTimeout     = 4 // the call's deadline or the grant's timeout passed
	HTTPCodeTooLarge    = 5 // request or response over its cap
	HTTPCodeBadRequest  = 6 // malformed request, bad path or buffer outside memory
	HTTPCodeUnavailable = 7 // retries exhausted (429, 5xx, transport errors)
)

// SpanHTTP is the span of one http_request host call; the client's
// inference.request span (its attempts) is its child.
const SpanHTTP = "plugin.http_request"

// HTTPLimits bound a run's http capability; zero fields take defaults.
type HTTPLimits struct {
	Rate             float64       // requests per second for the whole run (0: unlimited)
	Burst            int           // token bucket size (default 1, or Rate rounded up)
	MaxRequestBytes  int           // request (name + path + body) cap (default 256 KiB)
	MaxResponseBytes int           // response body cap (default 1 MiB, and never over the guest's buffer)
	Timeout          time.Duration // cap of one http_request, retries included (default 30s; the ABI call's deadline also applies)
	LogExchanges     int           // exchanges kept per instance for TakeHTTPExchanges (default 64)
}

func (l HTTPLimits) withDefaults() HTTPLimits {
	if l.Burst <= 0 {
		l.Burst = max(1, int(l.Rate+0.999))
	}
	if l.MaxRequestBytes <= 0 {
		l.MaxRequestBytes = 256 << 10
	}
	if l.MaxResponseBytes <= 0 {
		l.MaxResponseBytes = 1 << 20
	}
	if l.Timeout <= 0 {
		l.Timeout = 30 * time.Second
	}
	if l.LogExchanges <= 0 {
		l.LogExchanges = 64
	}
	return l
}

// HTTPGrant is one run's grant of the http capability: the endpoints it may
// call and the limits shared by every plugin instance of the run.
type HTTPGrant struct {
	run       string
	endpoints map[string]*inference.Client
	limits    HTTPLimits
	limiter   *rate.Limiter // nil: unlimited

	calls, refused, rateWaits, rateRefused, timeouts atomic.Int64
	requests                                         metric.Int64Counter
}

// NewHTTPGrant grants run the endpoints (name → client) under limits.
func NewHTTPGrant(run string, endpoints map[string]*inference.Client, limits HTTPLimits) *HTTPGrant {
	l := limits.withDefaults()
	g := &HTTPGrant{run: run, endpoints: endpoints, limits: l}
	if l.Rate > 0 {
		g.limiter = rate.NewLimiter(rate.Limit(l.Rate), l.Burst)
	}
	g.requests, _ = otel.Meter("github.com/trainyard/trainyard/internal/pluginhost").Int64Counter("trainyard.plugin.http.requests",
		metric.WithUnit("{request}"), metric.WithDescription("http_request host calls by run, endpoint and outcome"))
	return g
}

// Granted lists the endpoint names of the grant.
func (g *HTTPGrant) Granted() []string {
	out := make([]string, 0, len(g.endpoints))
	for n := range g.endpoints {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// HTTPStats counts a grant's host calls.
type HTTPStats struct {
	Calls       int64 // http_request calls
	Refused     int64 // refused: not allowed, bad request, too large
	RateWaits   int64 // calls that waited for the run's rate limit
	RateRefused int64 // calls refused because the wait would pass the deadline
	Timeouts    int64 // calls that ran out of time
}

// Stats reports the grant's counters.
func (g *HTTPGrant) Stats() HTTPStats {
	return HTTPStats{Calls: g.calls.Load(), Refused: g.refused.Load(), RateWaits: g.rateWaits.Load(),
		RateRefused: g.rateRefused.Load(), Timeouts: g.timeouts.Load()}
}

// HTTPExchange is one http_request as the host saw it; rollout workers
// attach them to trajectories (prompt, completion, weight version).
type HTTPExchange struct {
	Endpoint      string
	Path          string
	Status        int
	Request       []byte
	Response      []byte
	Attempts      int
	WeightVersion int64
	Duration      time.Duration
}

type exchangeLog struct {
	items []HTTPExchange
}

// httpBinding is a grant bound to one loaded module.
type httpBinding struct {
	grant   *HTTPGrant
	plugin  string
	allowed atomic.Pointer[map[string]bool] // nil until bind: every call refused
	mu      sync.Mutex
	logs    map[any]*exchangeLog // by guest api.Module
}

// bind restricts the grant to the endpoints the metadata declares.
func (b *httpBinding) bind(meta Metadata) {
	allowed := map[string]bool{}
	for _, n := range meta.DeclaredEndpoints(CapHTTP) {
		if _, ok := b.grant.endpoints[n]; ok {
			allowed[n] = true
		}
	}
	b.plugin = meta.Label()
	b.allowed.Store(&allowed)
}

func (b *httpBinding) forget(mod api.Module) {
	b.mu.Lock()
	delete(b.logs, mod)
	b.mu.Unlock()
}

func (b *httpBinding) record(mod api.Module, x HTTPExchange) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.logs[mod]
	if l == nil {
		l = &exchangeLog{}
		b.logs[mod] = l
	}
	if len(l.items) >= b.grant.limits.LogExchanges {
		l.items = append(l.items[:0], l.items[1:]...)
	}
	l.items = append(l.items, x)
}

func (b *httpBinding) take(mod api.Module) []HTTPExchange {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.logs[mod]
	if l == nil {
		return nil
	}
	out := l.items
	l.items = nil
	return out
}

// TakeHTTPExchanges returns and clears the http_request exchanges of the
// env's instance since the last take (nil without the http capability).
func (v *VecEnv) TakeHTTPExchanges() []HTTPExchange {
	if v.m.caps == nil || v.in == nil || v.in.mod == nil {
		return nil
	}
	return v.m.caps.take(v.in.mod)
}

// InstanceMemoryBytes is the size of the env instance's linear memory (0
// when it holds none), for memory accounting of many concurrent envs.
func (v *VecEnv) InstanceMemoryBytes() int {
	if v.in == nil || v.in.mem == nil {
		return 0
	}
	return int(v.in.mem.Size())
}

func (b *httpBinding) hostFunc() HostFunc {
	return HostFunc{
		Module:  HostModule,
		Name:    "http_request",
		Params:  []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32},
		Results: []api.ValueType{api.ValueTypeI64},
		Fn:      api.GoModuleFunc(b.call),
	}
}

// call is the host function. It never panics on guest input: every failure
// is a negative code and a message in the guest's buffer.
func (b *httpBinding) call(ctx context.Context, mod api.Module, stack []uint64) {
	g := b.grant
	g.calls.Add(1)
	reqPtr, reqLen, respPtr, respCap := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	mem := mod.Memory()
	if _, ok := mem.Read(respPtr, respCap); !ok {
		g.refused.Add(1)
		stack[0] = packResult(-HTTPCodeBadRequest, 0)
		return
	}
	reply := func(code int, msg []byte) {
		n := min(len(msg), int(respCap))
		mem.Write(respPtr, msg[:n])
		stack[0] = packResult(code, n)
	}
	fail := func(code int, endpoint, format string, args ...any) {
		if code == HTTPCodeNotAllowed || code == HTTPCodeBadRequest || code == HTTPCodeTooLarge {
			g.refused.Add(1)
		}
		g.requests.Add(ctx, 1, metric.WithAttributes(attribute.String("run", g.run), attribute.String("endpoint", endpoint), attribute.String("outcome", httpCodeName(code))))
		reply(-code, []byte(fmt.Sprintf(format, args...)))
	}
	if int(reqLen) > g.limits.MaxRequestBytes {
		fail(HTTPCodeTooLarge, "", "request of %d bytes exceeds the cap of %d", reqLen, g.limits.MaxRequestBytes)
		return
	}
	raw, ok := mem.Read(reqPtr, reqLen)
	if !ok {
		fail(HTTPCodeBadRequest, "", "request [%d,+%d) outside guest memory", reqPtr, reqLen)
		return
	}
	endpoint, path, body, err := DecodeHTTPRequest(raw)
	if err != nil {
		fail(HTTPCodeBadRequest, "", "%v", err)
		return
	}
	allowed := b.allowed.Load()
	client := g.endpoints[endpoint]
	if allowed == nil || !(*allowed)[endpoint] || client == nil {
		fail(HTTPCodeNotAllowed, endpoint, "capability http: endpoint %q not allowed for plugin %s in run %s (allowed: %v; the plugin must declare \"http:%s\" and the run grant it)",
			endpoint, b.plugin, g.run, keys(allowed), endpoint)
		return
	}
	body = append([]byte(nil), body...) // guest memory may move once the guest runs again
	if path == inference.ChatPath && len(body) > 0 {
		if body, err = withModel(body, client.Endpoint().Model); err != nil {
			fail(HTTPCodeBadRequest, endpoint, "chat request body: %v", err)
			return
		}
	}

	cctx, cancel, callBound := callContext(ctx, g.limits.Timeout)
	defer cancel()
	// expired: the ABI call itself is out of time, not just this request.
	expired := func() bool { return ctx.Err() != nil || callBound && cctx.Err() != nil }
	cctx, span := otel.Tracer("github.com/trainyard/trainyard/internal/pluginhost").Start(cctx, SpanHTTP, trace.WithAttributes(
		attribute.String("trainyard.run", g.run), AttrName.String(b.plugin), inference.AttrEndpoint.String(endpoint), inference.AttrPath.String(path)))
	defer span.End()
	if g.limiter != nil {
		r := g.limiter.Reserve()
		d := r.Delay()
		if dl, ok := cctx.Deadline(); !r.OK() || ok && time.Now().Add(d).After(dl) {
			r.Cancel()
			g.rateRefused.Add(1)
			span.SetStatus(codes.Error, "rate limited")
			fail(HTTPCodeRateLimited, endpoint, "capability http: rate limit of run %s (%g requests/s, burst %d) exceeded: the next slot is %v away, past the call's deadline",
				g.run, g.limits.Rate, g.limits.Burst, d.Round(time.Millisecond))
			return
		}
		if d > 0 {
			g.rateWaits.Add(1)
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-cctx.Done():
				t.Stop()
				g.timeouts.Add(1)
				if expired() {
					trapDeadline("http_request to " + endpoint + " (waiting for the rate limit)")
				}
				fail(HTTPCodeTimeout, endpoint, "capability http: deadline passed waiting for the rate limit")
				return
			}
		}
	}
	method := http.MethodGet
	if len(body) > 0 {
		method = http.MethodPost
	}
	start := time.Now()
	resp, err := client.Do(cctx, method, path, body, min(int(respCap), g.limits.MaxResponseBytes))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		switch {
		case errors.Is(err, inference.ErrTooLarge):
			fail(HTTPCodeTooLarge, endpoint, "%v", err)
		case cctx.Err() != nil:
			g.timeouts.Add(1)
			if expired() {
				g.requests.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("run", g.run), attribute.String("endpoint", endpoint), attribute.String("outcome", "timeout")))
				trapDeadline(fmt.Sprintf("http_request to %s%s (%d attempts)", endpoint, path, resp.Attempts))
			}
			fail(HTTPCodeTimeout, endpoint, "capability http: %s %s: timed out after %v and %d attempts: %v", endpoint, path, time.Since(start).Round(time.Millisecond), resp.Attempts, err)
		default:
			fail(HTTPCodeUnavailable, endpoint, "%v", err)
		}
		return
	}
	g.requests.Add(ctx, 1, metric.WithAttributes(attribute.String("run", g.run), attribute.String("endpoint", endpoint), attribute.String("outcome", "ok")))
	b.record(mod, HTTPExchange{Endpoint: endpoint, Path: path, Status: resp.Status, Request: body, Response: resp.Body,
		Attempts: resp.Attempts, WeightVersion: resp.WeightVersion, Duration: time.Since(start)})
	reply(resp.Status, resp.Body)
}

func packResult(code, n int) uint64 { return uint64(uint32(int32(code)))<<32 | uint64(uint32(n)) }

func httpCodeName(code int) string {
	switch code {
	case HTTPCodeNotAllowed:
		return "not_allowed"
	case HTTPCodeRateLimited:
		return "rate_limited"
	case HTTPCodeTimeout:
		return "timeout"
	case HTTPCodeTooLarge:
		return "too_large"
	case HTTPCodeBadRequest:
		return "bad_request"
	case HTTPCodeUnavailable:
		return "unavailable"
	}
	return "error"
}

func keys(m *map[string]bool) []string {
	if m == nil {
		return nil
	}
	out := make([]string, 0, len(*m))
	for k := range *m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// withModel fills in the endpoint's model when a chat request leaves it
// empty: plugins name endpoints, and the run decides which model serves.
func withModel(body []byte, model string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	if v, ok := m["model"]; ok && string(v) != `""` && string(v) != "null" {
		return body, nil
	}
	mb, _ := json.Marshal(model)
	m["model"] = mb
	return json.Marshal(m)
}

// Request encoding limits.
const (
	maxEndpointName = 63
	maxPath         = 1024
)

// EncodeHTTPRequest is the request encoding of http_request (the guest SDK
// has its own copy; the fuzz test checks the two agree through decoding).
func EncodeHTTPRequest(endpoint, path string, body []byte) []byte {
	b := make([]byte, 0, 3+len(endpoint)+len(path)+len(body))
	b = append(b, byte(len(endpoint)))
	b = append(b, endpoint...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(path)))
	b = append(b, path...)
	return append(b, body...)
}

// DecodeHTTPRequest parses an http_request request. The path must be an
// absolute path under /v1/ without "..", query or fragment: a plugin reaches
// the OpenAI-compatible API of its endpoint, not arbitrary URLs.
func DecodeHTTPRequest(b []byte) (endpoint, path string, body []byte, err error) {
	if len(b) < 1 {
		return "", "", nil, fmt.Errorf("request: empty")
	}
	n := int(b[0])
	if n == 0 || n > maxEndpointName || len(b) < 1+n+2 {
		return "", "", nil, fmt.Errorf("request: endpoint name of %d bytes in a %d-byte request (want 1-%d)", n, len(b), maxEndpointName)
	}
	endpoint = string(b[1 : 1+n])
	for _, c := range endpoint {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "", "", nil, fmt.Errorf("request: endpoint name %q: want [a-z0-9_-]", endpoint)
		}
	}
	rest := b[1+n:]
	pl := int(binary.LittleEndian.Uint16(rest))
	rest = rest[2:]
	if pl == 0 || pl > maxPath || pl > len(rest) {
		return "", "", nil, fmt.Errorf("request: path of %d bytes with %d left (want 1-%d)", pl, len(rest), maxPath)
	}
	path = string(rest[:pl])
	if !strings.HasPrefix(path, "/v1/") || strings.Contains(path, "..") || strings.ContainsAny(path, "?#%\\ \t\r\n") {
		return "", "", nil, fmt.Errorf("request: path %q: want /v1/... without .., query, fragment or escapes", path)
	}
	for _, c := range path {
		if c < 0x21 || c > 0x7e {
			return "", "", nil, fmt.Errorf("request: path %q: non-printable or non-ASCII character", path)
		}
	}
	return endpoint, path, rest[pl:], nil
}
