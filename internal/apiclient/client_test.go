package apiclient

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestUploadReportsProgress: the body goes out sized (not chunked), and
// progress climbs to the whole body.
func TestUploadReportsProgress(t *testing.T) {
	var gotLen int64
	var gotBytes int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotLen = r.ContentLength
		b, _ := io.ReadAll(r.Body)
		gotBytes = len(b)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x"}`))
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, HTTP: srv.Client()}
	data := make([]byte, 3<<20)
	var calls int
	var last, total int64
	var out struct{ ID string }
	err := c.Upload(t.Context(), "/v1/plugins", "module", "m.wasm", data, &out, func(sent, tot int64) {
		if sent < last {
			t.Errorf("progress went back from %d to %d", last, sent)
		}
		calls++
		last, total = sent, tot
	})
	if err != nil || out.ID != "x" {
		t.Fatalf("upload: %v %+v", err, out)
	}
	if gotLen != int64(gotBytes) || gotLen <= int64(len(data)) {
		t.Errorf("content length %d for a %d-byte body", gotLen, gotBytes)
	}
	if last != total || total != gotLen || calls < 3 {
		t.Errorf("progress ended at %d/%d after %d calls, body %d", last, total, calls, gotLen)
	}
}

// TestBusyIsRetried: a GET answered 429 is asked again after its
// Retry-After; a POST answered 429 is not (it may have been taken).
func TestBusyIsRetried(t *testing.T) {
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls[r.Method]++
		if calls[r.Method] == 1 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"status":429,"title":"Too Many Requests","detail":"the control plane is busy; retry shortly"}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":"x"}`))
	}))
	defer srv.Close()
	c := New(srv.URL, "t")
	var out struct{ ID string }
	if err := c.JSON(t.Context(), http.MethodGet, "/v1/runs/x", nil, &out); err != nil || out.ID != "x" || calls["GET"] != 2 {
		t.Fatalf("GET: %v %+v after %d calls", err, out, calls["GET"])
	}
	err := c.JSON(t.Context(), http.MethodPost, "/v1/runs", map[string]string{}, &out)
	var p *Problem
	if !errors.As(err, &p) || p.Status != http.StatusTooManyRequests || calls["POST"] != 1 {
		t.Fatalf("POST: %v after %d calls", err, calls["POST"])
	}
}
