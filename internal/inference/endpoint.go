// Package inference talks to OpenAI-compatible inference endpoints (vLLM,
// SGLang, TGI, any hosted API): endpoint definitions as a cluster declares
// them, health checks, and a client that bounds concurrency per endpoint,
// retries with jittered backoff and traces every call. Plugins reach an
// endpoint only through the http capability (plugins/capability_http.go),
// which uses this client; they never see its URL or credentials.
package inference

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/trainyard/trainyard/internal/names"
)

// Endpoint is one OpenAI-compatible inference service, declared in a cluster
// spec or through the API.
type Endpoint struct {
	Name  string `json:"name" yaml:"name"`
	URL   string `json:"url" yaml:"url"`     // base URL, e.g. http://10.0.0.5:8000 (paths like /v1/chat/completions are appended)
	Model string `json:"model" yaml:"model"` // served model name
	// CredentialsRef names where the API key lives ("env:VAR" or
	// "file:/path"); the host resolves it and sends it as a bearer token.
	// The key itself is never part of a spec, a plugin or a log line.
	CredentialsRef string `json:"credentials_ref,omitempty" yaml:"credentials_ref,omitempty"`
	// MaxConcurrency bounds requests in flight to this endpoint from one
	// process (default 64); further callers wait (back-pressure).
	MaxConcurrency int `json:"max_concurrency,omitempty" yaml:"max_concurrency,omitempty"`
	// Nodes and GPUs serving the endpoint: the scheduler and the GPU
	// preservation policy count them as reserved.
	Nodes []string `json:"nodes,omitempty" yaml:"nodes,omitempty"`
	GPUs  int      `json:"gpus,omitempty" yaml:"gpus,omitempty"`
	// Type decides how new weights are announced (weightsync.go): "openai"
	// (no reload), "vllm", "sglang" or "webhook"; or "trainer": a remote
	// training API that an LLM loop's llm.remote names, never granted to a
	// plugin.
	Type string `json:"type,omitempty" yaml:"type,omitempty"`
	// ReloadURL receives the weight-sync notification (type webhook, or a
	// vLLM/SGLang admin URL when it differs from URL).
	ReloadURL string `json:"reload_url,omitempty" yaml:"reload_url,omitempty"`
	// ReloadCommand, when set, is run instead of a webhook: argv with
	// TRAINYARD_WEIGHTS_URI and TRAINYARD_WEIGHTS_VERSION in its environment.
	ReloadCommand []string `json:"reload_command,omitempty" yaml:"reload_command,omitempty"`
}

// DefaultMaxConcurrency is an endpoint's concurrency limit when unset.
const DefaultMaxConcurrency = 64

// Endpoint types.
const (
	TypeOpenAI  = "openai"
	TypeVLLM    = "vllm"
	TypeSGLang  = "sglang"
	TypeWebhook = "webhook"
	// TypeTrainer is a remote training service: an LLM loop posts its
	// batches to URL with the endpoint's credentials. An admin declares it
	// (URL and credentials together); a run can only name it.
	TypeTrainer = "trainer"
)

// ErrInvalidEndpoint marks an endpoint definition that fails validation.
var ErrInvalidEndpoint = errors.New("invalid inference endpoint")

// Validate checks a definition; errors name the field.
func (e Endpoint) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w %q: %s: %s", ErrInvalidEndpoint, e.Name, field, fmt.Sprintf(format, args...))
	}
	if names.Endpoint.Check(e.Name) != nil {
		return bad("name", "must be %s", names.Endpoint.Rule())
	}
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("url", "%q is not an http(s) URL", e.URL)
	}
	if u.User != nil {
		return bad("url", "must not carry credentials; use credentials_ref")
	}
	if e.Model == "" && e.Type != TypeTrainer {
		return bad("model", "required")
	}
	if e.CredentialsRef != "" && !strings.HasPrefix(e.CredentialsRef, "env:") && !strings.HasPrefix(e.CredentialsRef, "file:") {
		return bad("credentials_ref", "%q must be env:VAR or file:/path", e.CredentialsRef)
	}
	if e.MaxConcurrency < 0 || e.MaxConcurrency > 100000 {
		return bad("max_concurrency", "%d outside [0,100000]", e.MaxConcurrency)
	}
	if e.GPUs < 0 {
		return bad("gpus", "%d < 0", e.GPUs)
	}
	if e.GPUs > 0 && len(e.Nodes) == 0 {
		return bad("nodes", "gpus %d needs the nodes that serve them", e.GPUs)
	}
	switch e.Type {
	case "", TypeOpenAI, TypeVLLM, TypeSGLang, TypeTrainer:
	case TypeWebhook:
		if e.ReloadURL == "" && len(e.ReloadCommand) == 0 {
			return bad("reload_url", "type webhook needs reload_url or reload_command")
		}
	default:
		return bad("type", "%q, want openai, vllm, sglang, webhook or trainer", e.Type)
	}
	if e.ReloadURL != "" {
		if u, err := url.Parse(e.ReloadURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("reload_url", "%q is not an http(s) URL", e.ReloadURL)
		}
	}
	return nil
}

func (e Endpoint) maxConcurrency() int {
	if e.MaxConcurrency > 0 {
		return e.MaxConcurrency
	}
	return DefaultMaxConcurrency
}

// Secrets resolves a credentials reference to the secret it names.
type Secrets interface {
	Resolve(ref string) (string, error)
}

// HostSecrets resolves env:VAR from the process environment and file:/path
// from the filesystem of the process that makes the calls (the agent).
type HostSecrets struct{}

// Resolve implements Secrets.
func (HostSecrets) Resolve(ref string) (string, error) {
	switch {
	case ref == "":
		return "", nil
	case strings.HasPrefix(ref, "env:"):
		v, ok := os.LookupEnv(strings.TrimPrefix(ref, "env:"))
		if !ok {
			return "", fmt.Errorf("credentials %s: variable not set", ref)
		}
		return v, nil
	case strings.HasPrefix(ref, "file:"):
		b, err := os.ReadFile(strings.TrimPrefix(ref, "file:"))
		if err != nil {
			return "", fmt.Errorf("credentials %s: %w", ref, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", fmt.Errorf("credentials %s: want env:VAR or file:/path", ref)
}

// Retry is the retry policy of a Client.
type Retry struct {
	MaxAttempts    int           // attempts per call including the first (default 4)
	AttemptTimeout time.Duration // deadline of one attempt (default 30s; the caller's deadline wins)
	BaseBackoff    time.Duration // first backoff before jitter (default 50ms)
	MaxBackoff     time.Duration // backoff cap (default 2s)
}

func (r Retry) withDefaults() Retry {
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 4
	}
	if r.AttemptTimeout <= 0 {
		r.AttemptTimeout = 30 * time.Second
	}
	if r.BaseBackoff <= 0 {
		r.BaseBackoff = 50 * time.Millisecond
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = 2 * time.Second
	}
	return r
}
