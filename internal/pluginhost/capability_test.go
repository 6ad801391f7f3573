package pluginhost

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/inference/inferencetest"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/plugins/arithmetic/problem"
)

// arithmeticModel answers the arithmetic env's questions correctly.
func arithmeticModel(msgs []inference.ChatMessage) string {
	p, ok := problem.Parse(msgs[len(msgs)-1].Content)
	if !ok {
		return "I do not know."
	}
	return strconv.Itoa(p.Answer())
}

// newEndpoint starts a loopback chat-completions server and a client for it
// whose API key comes from an environment variable.
func newEndpoint(t *testing.T, name string, retry inference.Retry) (*inferencetest.Server, *inference.Client) {
	t.Helper()
	srv := inferencetest.Start(t, "tiny-"+name)
	srv.Answer = arithmeticModel
	t.Setenv("TRAINYARD_TEST_KEY_"+strings.ToUpper(name), "sk-"+name+"-secret")
	c, err := inference.NewClient(inference.Endpoint{Name: name, URL: srv.URL, Model: "tiny-" + name,
		CredentialsRef: "env:TRAINYARD_TEST_KEY_" + strings.ToUpper(name), MaxConcurrency: 16}, inference.ClientOptions{Retry: retry})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func loadGranted(t *testing.T, rt *Runtime, wasm []byte, l Limits, g Grants) *Module {
	t.Helper()
	m, err := rt.LoadGranted(context.Background(), wasm, LoadOptions{Limits: l}, g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// TestHTTPCapabilityNotGranted: a plugin that imports the http capability
// is refused at load unless the run grants it, with an error that says
// which capability and how to grant it.
func TestHTTPCapabilityNotGranted(t *testing.T) {
	rt := newTestRuntime(t)
	wasm := plugintest.BuildGo(t, "./plugins/arithmetic")
	for _, tc := range []struct {
		name string
		load func() (*Module, error)
	}{
		{"plain Load", func() (*Module, error) { return rt.Load(t.Context(), wasm, LoadOptions{Limits: testLimits}) }},
		{"LoadGranted without http", func() (*Module, error) {
			return rt.LoadGranted(t.Context(), wasm, LoadOptions{Limits: testLimits}, Grants{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.load()
			if err == nil {
				m.Close(t.Context())
				t.Fatal("loaded without the http grant")
			}
			if !errors.Is(err, ErrNotGranted) || !errors.Is(err, ErrInvalidPlugin) {
				t.Fatalf("error %v does not wrap ErrNotGranted and ErrInvalidPlugin", err)
			}
			for _, want := range []string{`capability "http"`, "trainyard.http_request", "capabilities: {http:"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			t.Logf("error: %v", err)
		})
	}
	// A plugin that does not import it needs no grant.
	load(t, rt, plugintest.BuildGo(t, "./plugins/cartpole"), testLimits)
}

// TestValidateCapabilityPlugin: upload validation accepts a plugin that
// uses the http capability (init and reset run; nothing is sent).
func TestValidateCapabilityPlugin(t *testing.T) {
	rt := newTestRuntime(t)
	md, err := rt.Validate(t.Context(), plugintest.BuildGo(t, "./plugins/arithmetic"), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if got := md.DeclaredEndpoints(CapHTTP); len(got) != 1 || got[0] != "llm" {
		t.Fatalf("declared endpoints %v, want [llm]", got)
	}
}

// TestHTTPCapabilityGranted: with the grant, calls reach the endpoint with
// the host's credentials, the model is filled in, and the host records each
// exchange with the endpoint's weight version.
func TestHTTPCapabilityGranted(t *testing.T) {
	rt := newTestRuntime(t)
	srv, llm := newEndpoint(t, "llm", inference.Retry{})
	llm.SetWeightVersion(7)
	g := NewHTTPGrant("run-granted", map[string]*inference.Client{"llm": llm}, HTTPLimits{})
	m := loadGranted(t, rt, plugintest.BuildGo(t, "./plugins/arithmetic"), testLimits, Grants{HTTP: g})

	v, err := m.NewVecEnv(t.Context(), 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	b := newBatch(v, 3, 1)
	if err := v.Reset(3, b.obs); err != nil {
		t.Fatal(err)
	}
	for i := range b.act {
		b.act[i] = float32(i % 2)
	}
	if err := b.step(v); err != nil {
		t.Fatal(err)
	}
	for i, r := range b.rew {
		if r != 1 || !b.term[i] {
			t.Errorf("env %d: reward %v terminated %v, want 1 true (the model answers correctly)", i, r, b.term[i])
		}
	}
	xs := v.TakeHTTPExchanges()
	if len(xs) != 8 || srv.Completed() != 8 {
		t.Fatalf("%d exchanges recorded, %d completions served; want 8 and 8", len(xs), srv.Completed())
	}
	for _, x := range xs {
		if x.Endpoint != "llm" || x.Status != 200 || x.WeightVersion != 7 || !strings.Contains(string(x.Request), `"model":"tiny-llm"`) {
			t.Errorf("exchange %+v: want llm, 200, weight version 7 and the endpoint's model filled in", x)
		}
		if strings.Contains(string(x.Request), "secret") {
			t.Errorf("request body carries the key: %s", x.Request)
		}
	}
	if got := srv.AuthHeaders(); got["Bearer sk-llm-secret"] != 8 || len(got) != 1 {
		t.Errorf("server saw Authorization headers %v, want the injected key 8 times", got)
	}
	if len(v.TakeHTTPExchanges()) != 0 {
		t.Error("TakeHTTPExchanges did not clear the log")
	}
}

// TestHTTPCapabilityAllowList: only endpoints both declared by the plugin
// and granted by the run can be called; anything else is refused by the
// host before any request leaves it.
func TestHTTPCapabilityAllowList(t *testing.T) {
	rt := newTestRuntime(t)
	wasm := plugintest.BuildGo(t, "./internal/pluginhost/testdata/httpprobe") // declares http:llm only
	for _, tc := range []struct {
		name    string
		granted []string
		action  float32 // 0 calls "llm", 1 calls "other"
		want    float32 // HTTP status or -code
	}{
		{"declared and granted", []string{"llm"}, 0, 200},
		{"granted, not declared", []string{"llm", "other"}, 1, -HTTPCodeNotAllowed},
		{"declared, not granted", []string{"other"}, 0, -HTTPCodeNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servers := map[string]*inferencetest.Server{}
			clients := map[string]*inference.Client{}
			for _, n := range tc.granted {
				servers[n], clients[n] = newEndpoint(t, n, inference.Retry{})
			}
			g := NewHTTPGrant("run-allow", clients, HTTPLimits{})
			m := loadGranted(t, rt, wasm, testLimits, Grants{HTTP: g})
			v, err := m.NewVecEnv(t.Context(), 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			b := newBatch(v, 1, 1)
			if err := v.Reset(0, b.obs); err != nil {
				t.Fatal(err)
			}
			b.act[0] = tc.action
			if err := b.step(v); err != nil {
				t.Fatal(err)
			}
			if b.rew[0] != tc.want {
				t.Fatalf("http_request gave %v, want %v", b.rew[0], tc.want)
			}
			served := 0
			for _, s := range servers {
				served += s.Requests()
			}
			if tc.want < 0 && (served != 0 || g.Stats().Refused != 1) {
				t.Errorf("refused call: %d requests reached servers, %d refusals counted; want 0 and 1", served, g.Stats().Refused)
			}
			if tc.want < 0 && b.obs[0] == 0 {
				t.Error("refusal came without a message")
			}
		})
	}
}

// TestHTTPCapabilityRateLimit: the run's token bucket makes calls wait and
// refuses a call whose wait would pass the call's deadline.
func TestHTTPCapabilityRateLimit(t *testing.T) {
	rt := newTestRuntime(t)
	wasm := plugintest.BuildGo(t, "./internal/pluginhost/testdata/httpprobe")
	for _, tc := range []struct {
		name              string
		limits            HTTPLimits
		callTimeout       time.Duration
		calls             int
		want              []float32
		waits, refusedMin int64
	}{
		// 2/s, burst 1: every call after the first waits ~0.5s, within the 5s deadline.
		{"waits", HTTPLimits{Rate: 2, Burst: 1}, 5 * time.Second, 3, []float32{200, 200, 200}, 2, 0},
		// 0.2/s, burst 2: the third call's slot is ~5s away, past the 1s deadline.
		{"refuses past the deadline", HTTPLimits{Rate: 0.2, Burst: 2}, time.Second, 3, []float32{200, 200, -HTTPCodeRateLimited}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, llm := newEndpoint(t, "llm", inference.Retry{})
			g := NewHTTPGrant("run-rate", map[string]*inference.Client{"llm": llm}, tc.limits)
			l := testLimits
			l.CallTimeout = tc.callTimeout
			m := loadGranted(t, rt, wasm, l, Grants{HTTP: g})
			v, err := m.NewVecEnv(t.Context(), 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			b := newBatch(v, 1, 1)
			if err := v.Reset(0, b.obs); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var got []float32
			for range tc.calls {
				if err := b.step(v); err != nil {
					t.Fatal(err)
				}
				got = append(got, b.rew[0])
			}
			st := g.Stats()
			t.Logf("%d calls in %v; stats %+v; server completions %d", tc.calls, time.Since(start).Round(time.Millisecond), st, srv.Completed())
			for i := range tc.want {
				if got[i] != tc.want[i] {
					t.Fatalf("results %v, want %v", got, tc.want)
				}
			}
			if st.RateWaits < tc.waits || st.RateRefused < tc.refusedMin {
				t.Errorf("stats %+v: want ≥%d waits and ≥%d refusals", st, tc.waits, tc.refusedMin)
			}
			if want := int(tc.calls - int(st.RateRefused)); srv.Completed() != want {
				t.Errorf("server completed %d, want %d (refused calls never leave the host)", srv.Completed(), want)
			}
		})
	}
}

// TestHTTPCapabilitySlowEndpoint: slow answers and 429s are retried inside
// one call (attempt timeouts, jittered backoff) and the episode's reward is
// still the model's; an endpoint slower than the ABI call's deadline ends
// the call with ErrTimeout at the deadline, even though the guest is blocked
// in the host function.
func TestHTTPCapabilitySlowEndpoint(t *testing.T) {
	rt := newTestRuntime(t)
	wasm := plugintest.BuildGo(t, "./plugins/arithmetic")
	retry := inference.Retry{MaxAttempts: 5, AttemptTimeout: 150 * time.Millisecond, BaseBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	for _, tc := range []struct {
		name         string
		setup        func(*inferencetest.Server)
		callTimeout  time.Duration
		wantAttempts int
		wantTimeout  bool
	}{
		{"two slow answers", func(s *inferencetest.Server) { s.SlowNext(2, 2*time.Second) }, 5 * time.Second, 3, false},
		{"two 429s", func(s *inferencetest.Server) { s.Fail429(2) }, 5 * time.Second, 3, false},
		{"a 503", func(s *inferencetest.Server) { s.Fail503(1) }, 5 * time.Second, 2, false},
		{"slower than the call deadline", func(s *inferencetest.Server) { s.SetLatency(10 * time.Second) }, 400 * time.Millisecond, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, llm := newEndpoint(t, "llm", retry)
			tc.setup(srv)
			g := NewHTTPGrant("run-slow", map[string]*inference.Client{"llm": llm}, HTTPLimits{})
			l := testLimits
			l.CallTimeout = tc.callTimeout
			m := loadGranted(t, rt, wasm, l, Grants{HTTP: g})
			v, err := m.NewVecEnv(t.Context(), 1, 5)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			b := newBatch(v, 3, 1)
			if err := v.Reset(0, b.obs); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = b.step(v)
			took := time.Since(start)
			if tc.wantTimeout {
				if !errors.Is(err, ErrTimeout) {
					t.Fatalf("step: %v, want ErrTimeout", err)
				}
				t.Logf("call limit %v: ended after %v with %v", tc.callTimeout, took.Round(time.Millisecond), err)
				if g.Stats().Timeouts != 1 {
					t.Errorf("timeouts counted %d, want 1", g.Stats().Timeouts)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			xs := v.TakeHTTPExchanges()
			if b.rew[0] != 1 || len(xs) != 1 || xs[0].Attempts != tc.wantAttempts {
				t.Fatalf("reward %v, exchanges %+v; want reward 1 after %d attempts", b.rew[0], xs, tc.wantAttempts)
			}
			t.Logf("answered after %d attempts in %v (server saw %d requests)", xs[0].Attempts, took.Round(time.Millisecond), srv.Requests())
		})
	}
}

// FuzzDecodeHTTPRequest: decoding never panics, accepts what the encoder
// writes for valid names and paths, and whatever it accepts re-encodes to
// the same bytes.
func FuzzDecodeHTTPRequest(f *testing.F) {
	f.Add(EncodeHTTPRequest("llm", "/v1/chat/completions", []byte(`{"messages":[]}`)))
	f.Add(EncodeHTTPRequest("llm", "/v1/models", nil))
	f.Add(EncodeHTTPRequest("a", "/v1/../etc/passwd", nil))
	f.Add([]byte{3, 'l', 'l', 'm', 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ep, path, body, err := DecodeHTTPRequest(b)
		if err != nil {
			return
		}
		if !strings.HasPrefix(path, "/v1/") || strings.Contains(path, "..") || ep == "" {
			t.Fatalf("accepted endpoint %q path %q", ep, path)
		}
		if got := EncodeHTTPRequest(ep, path, body); string(got) != string(b) {
			t.Fatalf("re-encoding %q %q gave %x, want %x", ep, path, got, b)
		}
	})
}
