package api

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/dashboard"
)

// docsRefs are the URLs a page or stylesheet makes the browser load.
var (
	docsHTMLRef = regexp.MustCompile(`(?i)\b(src|href|apidescriptionurl)\s*=\s*["']([^"']*)["']`)
	docsCSSRef  = regexp.MustCompile(`url\(\s*["']?([^"')]*)["']?\s*\)`)
)

func docsGet(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec
}

// TestDocsAssetsServedLocally: every URL the /docs page (and the
// dashboard's shell at /ui) loads is this server's own (no scheme, no
// host) and is served by it; each page's Content-Security-Policy names no
// other origin either, so a browser refuses anything from a CDN even if a
// script tried.
func TestDocsAssetsServedLocally(t *testing.T) {
	for _, tc := range []struct {
		page, assets string
		types        map[string]string // extension → Content-Type the page must load one of
	}{
		{docsPath, docsAssetsPath, map[string]string{".js": "text/javascript", ".css": "text/css", ".yaml": "application/openapi+yaml"}},
		{dashboard.Path + "/runs", dashboard.AssetsPath, map[string]string{".js": "text/javascript", ".css": "text/css"}},
	} {
		t.Run(tc.page, func(t *testing.T) {
			checkPageLocal(t, New(Deps{TemporalUI: "http://127.0.0.1:8233"}).Handler(), tc.page, tc.assets, tc.types)
		})
	}
}

func checkPageLocal(t *testing.T, h http.Handler, path, assetsPath string, wantTypes map[string]string) {
	t.Helper()
	page := docsGet(t, h, path)
	if page.Code != http.StatusOK || !strings.HasPrefix(page.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("%s: %d %q", path, page.Code, page.Header().Get("Content-Type"))
	}
	body := page.Body.String()
	csp := page.Header().Get("Content-Security-Policy")
	if csp == "" || strings.Contains(csp, "http") || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("%s Content-Security-Policy %q: want scripts from 'self' only", path, csp)
	}

	refs := docsHTMLRef.FindAllStringSubmatch(body, -1)
	seen := map[string]bool{}
	for _, m := range refs {
		ref := m[2]
		u, err := url.Parse(ref)
		if err != nil || u.Scheme != "" || u.Host != "" || strings.HasPrefix(ref, "//") {
			t.Errorf("%s=%q is not a URL of this server", m[1], ref)
			continue
		}
		abs := (&url.URL{Path: path}).ResolveReference(u)
		rec := docsGet(t, h, abs.RequestURI())
		if rec.Code != http.StatusOK || rec.Body.Len() == 0 {
			t.Errorf("%s=%q: GET %s answered %d with %d bytes", m[1], ref, abs.RequestURI(), rec.Code, rec.Body.Len())
			continue
		}
		for ext, ct := range wantTypes {
			if strings.HasSuffix(abs.Path, ext) {
				seen[ext] = true
				if got := rec.Header().Get("Content-Type"); !strings.HasPrefix(got, ct) {
					t.Errorf("%s: Content-Type %q, want %s", abs.Path, got, ct)
				}
			}
		}
		if strings.HasSuffix(abs.Path, ".css") {
			for _, c := range docsCSSRef.FindAllStringSubmatch(rec.Body.String(), -1) {
				if cu, err := url.Parse(c[1]); err != nil || (cu.Scheme != "" && cu.Scheme != "data") || cu.Host != "" {
					t.Errorf("%s loads %q", abs.Path, c[1])
				}
			}
		}
	}
	for ext := range wantTypes {
		if !seen[ext] {
			t.Errorf("%s loads no %s file (refs %q)", path, ext, refs)
		}
	}

	// Versioned asset URLs are cached for good; an unknown asset is a
	// problem document like every other 404.
	for _, m := range refs {
		if strings.HasPrefix(m[2], assetsPath) {
			if cc := docsGet(t, h, m[2]).Header().Get("Cache-Control"); !strings.Contains(cc, "immutable") {
				t.Errorf("%s: Cache-Control %q", m[2], cc)
			}
		}
	}
	if rec := docsGet(t, h, assetsPath+"nope.js"); rec.Code != http.StatusNotFound ||
		rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Errorf("unknown asset: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
}
