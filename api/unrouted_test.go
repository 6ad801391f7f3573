package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUnroutedAnswersAreProblems: what no operation handles still answers
// with a problem document, keeping the mux's status (and Allow).
func TestUnroutedAnswersAreProblems(t *testing.T) {
	h := New(Deps{}).Handler()
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/v1/no-such-route", http.StatusNotFound, ""},
		{"PATCH", "/healthz", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"DELETE", "/v1/runs", http.StatusMethodNotAllowed, "GET, HEAD, POST"},
		{"GET", "/v1/runs/a%01b", http.StatusNotFound, ""},
		{"GET", "/v1/clusters/%C3%BC", http.StatusNotFound, ""},
		{"GET", "/healthz", http.StatusOK, ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.allow != "" && rec.Header().Get("Allow") != tc.allow {
				t.Errorf("Allow %q, want %q", rec.Header().Get("Allow"), tc.allow)
			}
			if rec.Code < 400 {
				return
			}
			var p struct {
				Status int    `json:"status"`
				Title  string `json:"title"`
				Detail string `json:"detail"`
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" || json.Unmarshal(rec.Body.Bytes(), &p) != nil ||
				p.Status != tc.status || p.Title == "" {
				t.Errorf("not a problem document: %s %s", rec.Header().Get("Content-Type"), rec.Body)
			}
			if tc.status == http.StatusMethodNotAllowed && !strings.Contains(p.Detail, "allowed: "+tc.allow) {
				t.Errorf("detail %q does not say what is allowed", p.Detail)
			}
		})
	}
}

// FuzzRouting: any method and path, routed or not, answers without a
// panic, and every error is a problem document (no token store here, so
// /v1 routes answer 503 problems; everything else is routed for real).
func FuzzRouting(f *testing.F) {
	h := New(Deps{}).Handler()
	for _, seed := range [][2]string{
		{"GET", "/healthz"}, {"PATCH", "/healthz"}, {"GET", "/v1/runs/x"}, {"GET", "/v1/nope"},
		{"POST", "/nope/../v1/runs"}, {"GET", "/v1/runs/%00"}, {"OPTIONS", "*"}, {"GET", "/docs"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		req, err := http.NewRequest(method, "http://api.test"+path, nil)
		if err != nil || req.URL.Path == "" {
			return // not a request a client could send
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 400 && rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s %q: %d with %q: %.200s", method, path, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
		if rec.Code == http.StatusInternalServerError {
			t.Fatalf("%s %q: 500 %.200s", method, path, rec.Body)
		}
	})
}
