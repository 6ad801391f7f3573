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
