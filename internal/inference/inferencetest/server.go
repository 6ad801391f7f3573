// Package inferencetest runs a real OpenAI-compatible HTTP server on
// loopback for tests: GET /v1/models, POST /v1/chat/completions in the
// chat-completions wire format, and a reload hook for weight sync, with
// knobs for latency, 429s and 5xxs. Answers come from a Go function (the
// "model"), so tests can make it right, wrong or slow.
package inferencetest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/inference"
)

// Server is a running test endpoint.
type Server struct {
	URL   string
	Model string
	// Answer produces the assistant message for a request (default: "ok").
	Answer func(messages []inference.ChatMessage) string
	// OnReload, when set, loads the weights a weight-sync notification
	// names; an error answers 500 and the version stays.
	OnReload func(Reload) error

	latency   atomic.Int64 // ns per chat completion
	slowN     atomic.Int64 // next requests delayed by slowD
	slowD     atomic.Int64
	fail429   atomic.Int64 // next requests answered 429
	fail503   atomic.Int64 // next requests answered 503
	requests  atomic.Int64
	completed atomic.Int64
	inflight  atomic.Int64
	peak      atomic.Int64
	version   atomic.Int64

	mu       sync.Mutex
	auth     map[string]int // Authorization headers seen
	reloads  []Reload
	srv      *http.Server
	listener net.Listener
}

// Reload is one weight-sync notification the server received.
type Reload struct {
	Version int64  `json:"version"`
	URI     string `json:"uri"`
}

// Start serves on 127.0.0.1 on a random port until the test ends.
func Start(t testing.TB, model string) *Server {
	t.Helper()
	s, err := Listen("127.0.0.1:0", model)
	if err != nil {
		t.Fatalf("inferencetest: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Listen serves on addr until Close (`trainyard endpoint mock` runs one
// for people trying the LLM loop without a model server).
func Listen(addr, model string) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &Server{URL: "http://" + l.Addr().String(), Model: model, auth: map[string]int{}, listener: l}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("POST /admin/reload", s.reload)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// Close stops serving.
func (s *Server) Close() error { return s.srv.Close() }

// SetLatency makes every chat completion take d before answering.
func (s *Server) SetLatency(d time.Duration) { s.latency.Store(int64(d)) }

// SlowNext delays the next n chat completions by d (instead of the latency).
func (s *Server) SlowNext(n int, d time.Duration) {
	s.slowD.Store(int64(d))
	s.slowN.Store(int64(n))
}

// Fail429 answers the next n chat completions with 429 Too Many Requests.
func (s *Server) Fail429(n int) { s.fail429.Store(int64(n)) }

// Fail503 answers the next n chat completions with 503.
func (s *Server) Fail503(n int) { s.fail503.Store(int64(n)) }

// Requests counts chat completions received (including failed ones).
func (s *Server) Requests() int { return int(s.requests.Load()) }

// Completed counts chat completions answered 200.
func (s *Server) Completed() int { return int(s.completed.Load()) }

// PeakInFlight is the most chat completions handled at once.
func (s *Server) PeakInFlight() int { return int(s.peak.Load()) }

// Version is the weight version last announced through /admin/reload.
func (s *Server) Version() int64 { return s.version.Load() }

// Reloads lists the reload notifications received.
func (s *Server) Reloads() []Reload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reload(nil), s.reloads...)
}

// AuthHeaders counts the Authorization headers seen.
func (s *Server) AuthHeaders() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.auth {
		out[k] = v
	}
	return out
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{
		{"id": s.Model, "object": "model", "owned_by": "trainyard-test"},
	}})
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	s.mu.Lock()
	s.auth[r.Header.Get("Authorization")]++
	s.mu.Unlock()
	if s.fail429.Add(-1) >= 0 {
		w.Header().Set("Retry-After", "0")
		writeJSON(w, http.StatusTooManyRequests, errorBody("rate limit exceeded", "rate_limit_exceeded"))
		return
	}
	if s.fail503.Add(-1) >= 0 {
		writeJSON(w, http.StatusServiceUnavailable, errorBody("overloaded", "server_error"))
		return
	}
	var req inference.ChatRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody("decode request: "+err.Error(), "invalid_request_error"))
		return
	}
	if req.Model != s.Model {
		writeJSON(w, http.StatusNotFound, errorBody(fmt.Sprintf("model %q does not exist", req.Model), "invalid_request_error"))
		return
	}
	if len(req.Messages) == 0 {
		writeJSON(w, http.StatusBadRequest, errorBody("messages must not be empty", "invalid_request_error"))
		return
	}
	d := time.Duration(s.latency.Load())
	if s.slowN.Add(-1) >= 0 {
		d = time.Duration(s.slowD.Load())
	}
	if d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return // the client gave up
		}
	}
	answer := "ok"
	if s.Answer != nil {
		answer = s.Answer(req.Messages)
	}
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(m.Content) / 4
	}
	s.completed.Add(1)
	writeJSON(w, http.StatusOK, inference.ChatResponse{
		ID: fmt.Sprintf("chatcmpl-%d", s.requests.Load()), Object: "chat.completion", Created: time.Now().Unix(),
		Model:   s.Model,
		Choices: []inference.ChatChoice{{Index: 0, Message: inference.ChatMessage{Role: "assistant", Content: answer}, FinishReason: "stop"}},
		Usage:   inference.Usage{PromptTokens: prompt, CompletionTokens: len(answer)/4 + 1, TotalTokens: prompt + len(answer)/4 + 1},
	})
}

func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	var rl Reload
	if err := json.NewDecoder(r.Body).Decode(&rl); err != nil || rl.URI == "" {
		writeJSON(w, http.StatusBadRequest, errorBody("want {version, uri}", "invalid_request_error"))
		return
	}
	if s.OnReload != nil {
		if err := s.OnReload(rl); err != nil {
			writeJSON(w, http.StatusInternalServerError, errorBody(err.Error(), "server_error"))
			return
		}
	}
	s.mu.Lock()
	s.reloads = append(s.reloads, rl)
	s.mu.Unlock()
	s.version.Store(rl.Version)
	writeJSON(w, http.StatusOK, map[string]any{"loaded": rl.Version})
}

func errorBody(msg, typ string) map[string]any {
	return map[string]any{"error": map[string]any{"message": msg, "type": typ}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
