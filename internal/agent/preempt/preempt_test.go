package preempt

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// metadata is a loopback stand-in for the providers' metadata servers,
// speaking their wire protocols: AWS IMDSv2 (a PUT for a session token,
// required on the GET) and GCP (the Metadata-Flavor header). noticed flips
// all three from "no notice" to "notice".
type metadata struct {
	noticed atomic.Bool
	hits    atomic.Int32
}

func (m *metadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.hits.Add(1)
	switch {
	case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
		if r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") == "" {
			http.Error(w, "missing ttl", http.StatusBadRequest)
			return
		}
		io.WriteString(w, "tok-123")
	case r.URL.Path == "/latest/meta-data/spot/instance-action":
		if r.Header.Get("X-aws-ec2-metadata-token") != "tok-123" {
			http.Error(w, "", http.StatusUnauthorized)
			return
		}
		if !m.noticed.Load() {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, `{"action": "stop", "time": "2026-11-22T10:02:00Z"}`)
	case r.URL.Path == "/computeMetadata/v1/instance/preempted":
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "", http.StatusForbidden)
			return
		}
		if m.noticed.Load() {
			io.WriteString(w, "TRUE")
		} else {
			io.WriteString(w, "FALSE")
		}
	case r.URL.Path == "/notice":
		if !m.noticed.Load() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		io.WriteString(w, "going")
	default:
		http.NotFound(w, r)
	}
}

func TestSources(t *testing.T) {
	m := &metadata{}
	srv := httptest.NewServer(m)
	defer srv.Close()
	for _, tc := range []struct {
		spec       string
		action     string
		deadline   time.Time // zero: about now (+ what the provider assumes)
		assumedFor time.Duration
	}{
		{spec: "aws:" + srv.URL, action: "stop", deadline: time.Date(2026, 11, 22, 10, 2, 0, 0, time.UTC)},
		{spec: "gcp:" + srv.URL + "/", action: "preempted", assumedFor: 30 * time.Second},
		{spec: srv.URL + "/notice", action: "terminate"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			m.noticed.Store(false)
			src, err := Parse(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if n, ok, err := src.Check(ctx); ok || err != nil {
				t.Fatalf("before the notice: %v %v %v", n, ok, err)
			}
			m.noticed.Store(true)
			n, ok, err := src.Check(ctx)
			if !ok || err != nil {
				t.Fatalf("after the notice: %v %v", ok, err)
			}
			if n.Action != tc.action {
				t.Errorf("action %q, want %q", n.Action, tc.action)
			}
			if !tc.deadline.IsZero() && !n.Deadline.Equal(tc.deadline) {
				t.Errorf("deadline %v, want %v", n.Deadline, tc.deadline)
			}
			if tc.deadline.IsZero() {
				if d := time.Until(n.Deadline); d > tc.assumedFor+time.Second || d < tc.assumedFor-5*time.Second {
					t.Errorf("deadline in %v, want about %v", d, tc.assumedFor)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, spec := range []string{"", "azure", "aws:", "gcp:metadata", "ftp://x"} {
		if _, err := Parse(spec); err == nil || !strings.Contains(err.Error(), "want aws, gcp") {
			t.Errorf("Parse(%q) = %v, want a clear error", spec, err)
		}
	}
}

// TestWatch: polling until the notice, which is handed on exactly once; an
// endpoint that errors is not a notice.
func TestWatch(t *testing.T) {
	m := &metadata{}
	srv := httptest.NewServer(m)
	defer srv.Close()
	src, _ := Parse(srv.URL + "/notice")
	got := make(chan Notice, 2)
	done := make(chan struct{})
	go func() {
		Watch(context.Background(), src, 10*time.Millisecond, slog.New(slog.DiscardHandler), func(n Notice) { got <- n })
		close(done)
	}()
	for m.hits.Load() < 3 {
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case n := <-got:
		t.Fatalf("notice before one was given: %v", n)
	default:
	}
	m.noticed.Store(true)
	<-done
	if len(got) != 1 {
		t.Fatalf("%d notices, want 1", len(got))
	}

	bad, _ := Parse(srv.URL + "/nothing-here-500")
	bad.base = srv.URL + "/latest/meta-data/spot/instance-action" // 401 without a token
	if _, ok, err := bad.Check(context.Background()); ok || err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("erroring endpoint: ok=%v err=%v", ok, err)
	}
}
