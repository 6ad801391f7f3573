package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestShell: every page is the same shell, which carries the Temporal UI's
// URL and namespace for app.js (escaped: it is configuration, not markup)
// and names each asset by a versioned URL that serves it.
func TestShell(t *testing.T) {
	s := New(Options{TemporalUI: `http://temporal:8233/"><script>x</script>`, Namespace: "prod"})
	rec := httptest.NewRecorder()
	s.ServePage(rec, httptest.NewRequest(http.MethodGet, "/ui/runs/run-1", nil))
	page := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(rec.Header().Get("Content-Security-Policy"), "connect-src 'self'") {
		t.Fatalf("page: %d, CSP %q", rec.Code, rec.Header().Get("Content-Security-Policy"))
	}
	for _, want := range []string{`content="http://temporal:8233/&#34;&gt;&lt;script&gt;x&lt;/script&gt;"`, `name="trainyard-namespace" content="prod"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s:\n%s", want, page)
		}
	}
	if strings.Count(page, "<script") != 2 {
		t.Errorf("page has %d scripts, want uPlot and app.js:\n%s", strings.Count(page, "<script"), page)
	}
	for _, name := range []string{"app.js", "app.css", "uplot/uPlot.iife.min.js", "uplot/uPlot.min.css"} {
		u := s.assets.URL(name)
		if !strings.Contains(page, `"`+u+`"`) {
			t.Errorf("page does not load %s", u)
		}
		rec := httptest.NewRecorder()
		if !s.ServeAsset(rec, httptest.NewRequest(http.MethodGet, u, nil), name) || rec.Code != http.StatusOK || rec.Body.Len() < 1000 {
			t.Errorf("%s: %d, %d bytes", u, rec.Code, rec.Body.Len())
		}
	}
}
