// Package api is Trainyard's REST API: huma operations over net/http, every
// error an RFC 9457 problem document, every route guarded by a bearer token
// with a role. The OpenAPI document (openapi.yaml) falls out of the types.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.temporal.io/sdk/client"

	"github.com/trainyard/trainyard/internal/admission"
	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
)

// Version is reported in the OpenAPI document.
const Version = "0.1.0"

// Deps are the services handlers use. All may be nil when the API is built
// only to render its OpenAPI document.
type Deps struct {
	Temporal  client.Client
	Namespace string
	Tokens    *auth.Store
	Store     *objstore.Store
	// Plugins validates uploads; PluginStore keeps them.
	Plugins     *pluginhost.Runtime
	PluginStore *pluginstore.Store
	// Admission decides submissions with the policy bundle in force.
	Admission *admission.Service
	Logger    *slog.Logger
	// Metrics, when set, is served at GET /metrics (Prometheus text format,
	// no token: scrapers run inside the trust boundary).
	Metrics http.Handler
	// Ready lists the named checks /readyz runs; all must pass.
	Ready map[string]func(context.Context) error
	// TemporalUI is the Temporal Web UI's base URL; the dashboard links
	// each workflow there (empty: no links).
	TemporalUI string
	// AgentTemporal is the Temporal frontend host:port agents dial, as
	// the control plane knows it: what join commands name.
	AgentTemporal string
	// AgentS3 is the S3 endpoint (a URL) and bucket agents keep training
	// state in, as join output names them (empty: agents are told nothing).
	AgentS3, AgentS3Bucket string
}

// Server holds the API's dependencies; its methods are the handlers.
type Server struct {
	d      Deps
	API    huma.API
	mux    *http.ServeMux
	status statusCalls // cluster status queries in flight (submit.go)
}

// New builds the API and registers every route.
func New(d Deps) *Server {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	cfg := huma.DefaultConfig("Trainyard API", Version)
	cfg.Info.Description = "Train reinforcement-learning agents and self-play bots on messy clusters. " +
		"Authenticate with `Authorization: Bearer <token>`; roles are viewer (read), operator (submit, cancel, upload) and admin (policies, clusters, tokens)."
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "A Trainyard API token (ty_...)."},
	}
	// huma's /docs page loads its renderer from a CDN; registerDocs serves
	// the same renderer from the binary instead (docs.go).
	cfg.DocsPath = ""
	s := &Server{d: d, mux: mux}
	s.API = humago.New(mux, cfg)
	s.API.UseMiddleware(s.authenticate)
	if d.Metrics != nil {
		mux.Handle("GET /metrics", d.Metrics)
	}
	s.registerDocs()
	s.registerDashboard()
	s.registerSystem()
	s.registerWorkflows()
	s.registerTokens()
	s.registerPlugins()
	s.registerClusters()
	s.registerEndpoints()
	s.registerQueue()
	s.registerPolicies()
	s.registerRuns()
	s.registerScalars()
	s.registerWorkJobs()
	s.registerLogs()
	s.registerUsage()
	s.registerSelfplay()
	s.registerSelfplayOps()
	s.registerSweeps()
	// An iteration's metrics carry the algorithm's own numbers beside
	// the common fields (learner.Metrics encodes them flat).
	if m := s.API.OpenAPI().Components.Schemas.Map()["Metrics"]; m != nil {
		m.AdditionalProperties = &huma.Schema{Type: huma.TypeNumber, Format: "double",
			Description: "The algorithm's own metrics by name (ppo: policy_loss, value_loss, entropy, approx_kl, ...; dqn: q_loss, q_mean, epsilon, ...)."}
	}
	return s
}

// Handler is the HTTP entry point: a server span per request, and an
// access-log line that carries the span's trace id.
func (s *Server) Handler() http.Handler {
	logged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		if r.Method == http.MethodPost && r.URL.Path == "/v1/plugins" {
			// Multipart bodies bypass huma's body limit; cap the upload here.
			r.Body = http.MaxBytesReader(rec, r.Body, MaxPluginBytes+1<<20)
		}
		s.serveMux(rec, r)
		level := slog.LevelInfo
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			level = slog.LevelDebug
		}
		if rec.status >= 500 {
			level = slog.LevelError
		}
		s.d.Logger.Log(r.Context(), level, "http request", "method", r.Method, "path", r.URL.Path,
			"status", rec.status, "duration_ms", time.Since(start).Milliseconds())
	})
	return otelhttp.NewHandler(logged, "trainyard-api", otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		return r.Method + " " + r.URL.Path
	}))
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

type ctxKey int

const tokenKey ctxKey = 0

// TokenFrom returns the authenticated token of a request.
func TokenFrom(ctx context.Context) (auth.Token, bool) {
	t, ok := ctx.Value(tokenKey).(auth.Token)
	return t, ok
}

// op declares an operation that needs at least role (empty: public).
func op(method, path, id, summary string, role auth.Role, tags ...string) huma.Operation {
	o := huma.Operation{
		OperationID: id,
		Method:      method,
		Path:        path,
		Summary:     summary,
		Tags:        tags,
		Metadata:    map[string]any{"role": role},
	}
	if role != "" {
		// Machine-readable for clients and for the authorization matrix test.
		o.Extensions = map[string]any{"x-trainyard-role": string(role)}
		o.Security = []map[string][]string{{"bearer": {}}}
		o.Description = "Requires role **" + string(role) + "** or higher."
		o.Errors = []int{http.StatusUnauthorized, http.StatusForbidden}
	}
	return o
}

func (s *Server) authenticate(ctx huma.Context, next func(huma.Context)) {
	need, _ := ctx.Operation().Metadata["role"].(auth.Role)
	if need == "" {
		next(ctx)
		return
	}
	h := ctx.Header("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || secret == "" {
		ctx.SetHeader("WWW-Authenticate", `Bearer realm="trainyard"`)
		_ = huma.WriteErr(s.API, ctx, http.StatusUnauthorized, "missing bearer token: send 'Authorization: Bearer <token>'")
		return
	}
	if s.d.Tokens == nil {
		_ = huma.WriteErr(s.API, ctx, http.StatusServiceUnavailable, "token store not configured")
		return
	}
	tok, err := s.d.Tokens.Authenticate(strings.TrimSpace(secret))
	if err != nil {
		ctx.SetHeader("WWW-Authenticate", `Bearer realm="trainyard", error="invalid_token"`)
		_ = huma.WriteErr(s.API, ctx, http.StatusUnauthorized, "invalid token: unknown or revoked")
		return
	}
	if !tok.Role.Allows(need) {
		_ = huma.WriteErr(s.API, ctx, http.StatusForbidden,
			"role "+string(tok.Role)+" may not "+ctx.Operation().OperationID+": it needs role "+string(need))
		return
	}
	next(huma.WithValue(ctx, tokenKey, tok))
}
