package inference_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/inference/inferencetest"
)

func TestValidate(t *testing.T) {
	ok := inference.Endpoint{Name: "llm", URL: "http://10.0.0.5:8000", Model: "m"}
	for _, tc := range []struct {
		name  string
		edit  func(*inference.Endpoint)
		field string // "" = valid
	}{
		{"minimal", func(*inference.Endpoint) {}, ""},
		{"full", func(e *inference.Endpoint) {
			e.CredentialsRef, e.MaxConcurrency, e.Nodes, e.GPUs, e.Type, e.ReloadURL = "env:KEY", 100, []string{"gpu-1"}, 1, "webhook", "http://10.0.0.5:9000/reload"
		}, ""},
		{"bad name", func(e *inference.Endpoint) { e.Name = "LLM!" }, "name"},
		{"no scheme", func(e *inference.Endpoint) { e.URL = "10.0.0.5:8000" }, "url"},
		{"userinfo", func(e *inference.Endpoint) { e.URL = "http://u:p@host" }, "url"},
		{"no model", func(e *inference.Endpoint) { e.Model = "" }, "model"},
		{"inline secret", func(e *inference.Endpoint) { e.CredentialsRef = "sk-123" }, "credentials_ref"},
		{"negative concurrency", func(e *inference.Endpoint) { e.MaxConcurrency = -1 }, "max_concurrency"},
		{"gpus without nodes", func(e *inference.Endpoint) { e.GPUs = 2 }, "nodes"},
		{"webhook without target", func(e *inference.Endpoint) { e.Type = "webhook" }, "reload_url"},
		{"unknown type", func(e *inference.Endpoint) { e.Type = "grpc" }, "type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := ok
			tc.edit(&e)
			err := e.Validate()
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("valid endpoint rejected: %v", err)
			case tc.field != "" && (err == nil || !errors.Is(err, inference.ErrInvalidEndpoint) || !strings.Contains(err.Error(), ": "+tc.field+": ")):
				t.Fatalf("error %v, want one naming field %s", err, tc.field)
			}
		})
	}
}

func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "key"), []byte("sk-file\n"), 0o600)
	t.Setenv("INF_TEST_KEY", "sk-env")
	for _, tc := range []struct {
		ref, want string
		err       bool
	}{
		{"env:INF_TEST_KEY", "sk-env", false},
		{"file:" + filepath.Join(dir, "key"), "sk-file", false},
		{"env:INF_TEST_MISSING", "", true},
		{"file:" + filepath.Join(dir, "nope"), "", true},
		{"", "", false},
	} {
		got, err := inference.HostSecrets{}.Resolve(tc.ref)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("Resolve(%q) = %q, %v", tc.ref, got, err)
		}
	}
}

func TestHealth(t *testing.T) {
	srv := inferencetest.Start(t, "m1")
	for _, tc := range []struct {
		name    string
		url     string
		model   string
		healthy bool
	}{
		{"serves the model", srv.URL, "m1", true},
		{"other model", srv.URL, "m2", false},
		{"nothing listening", "http://127.0.0.1:1", "m1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := inference.NewClient(inference.Endpoint{Name: "e", URL: tc.url, Model: tc.model}, inference.ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			h := c.Check(ctx)
			if h.Healthy != tc.healthy || (!h.Healthy && h.Error == "") {
				t.Fatalf("health %+v, want healthy=%v with a reason when not", h, tc.healthy)
			}
		})
	}
}

// TestConcurrencyLimit: 40 callers on an endpoint limited to 8 never have
// more than 8 requests in flight; the rest wait and are counted saturated.
func TestConcurrencyLimit(t *testing.T) {
	srv := inferencetest.Start(t, "m")
	srv.SetLatency(50 * time.Millisecond)
	r := sdkmetric.NewManualReader()
	c, err := inference.NewClient(inference.Endpoint{Name: "e", URL: srv.URL, Model: "m", MaxConcurrency: 8},
		inference.ClientOptions{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			cr, _, err := c.Chat(t.Context(), []inference.ChatMessage{{Role: "user", Content: "hi"}}, 1<<16)
			if err != nil || cr.Choices[0].Message.Content != "ok" || cr.Model != "m" {
				t.Errorf("chat: %+v, %v", cr, err)
			}
		})
	}
	wg.Wait()
	var rm metricdata.ResourceMetrics
	r.Collect(context.Background(), &rm)
	var saturated int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "trainyard.inference.saturated" {
				for _, p := range s.DataPoints {
					saturated += p.Value
				}
			}
		}
	}
	t.Logf("peak in flight %d, %d saturated waits", srv.PeakInFlight(), saturated)
	if srv.PeakInFlight() > 8 || srv.Completed() != 40 || saturated == 0 {
		t.Fatalf("peak %d in flight (limit 8), %d completed, %d saturated", srv.PeakInFlight(), srv.Completed(), saturated)
	}
}

func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    func(*inferencetest.Server)
		attempts int
		err      error
		status   int
	}{
		{"429 then ok", func(s *inferencetest.Server) { s.Fail429(2) }, 3, nil, 200},
		{"503 then ok", func(s *inferencetest.Server) { s.Fail503(1) }, 2, nil, 200},
		{"slow then ok", func(s *inferencetest.Server) { s.SlowNext(1, time.Minute) }, 2, nil, 200},
		{"always 503", func(s *inferencetest.Server) { s.Fail503(100) }, 3, inference.ErrUnavailable, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := inferencetest.Start(t, "m")
			tc.setup(srv)
			c, err := inference.NewClient(inference.Endpoint{Name: "e", URL: srv.URL, Model: "m"}, inference.ClientOptions{
				Retry: inference.Retry{MaxAttempts: 3, AttemptTimeout: 200 * time.Millisecond, BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(t.Context(), http.MethodPost, inference.ChatPath, []byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`), 1<<16)
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || resp.Status != tc.status || resp.Attempts != tc.attempts {
				t.Fatalf("status %d after %d attempts, err %v; want %d after %d, err %v", resp.Status, resp.Attempts, err, tc.status, tc.attempts, tc.err)
			}
		})
	}
	// A response over the cap is an error, not truncated data.
	srv := inferencetest.Start(t, "m")
	c, _ := inference.NewClient(inference.Endpoint{Name: "e", URL: srv.URL, Model: "m"}, inference.ClientOptions{})
	if _, err := c.Do(t.Context(), http.MethodGet, "/v1/models", nil, 10); !errors.Is(err, inference.ErrTooLarge) {
		t.Fatalf("10-byte cap: %v", err)
	}
}
