package api

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The API reference at /docs is Stoplight Elements, served from the binary
// so that it renders in a lab without internet (huma's own /docs page loads
// it from a CDN). The files under docsui/ are checked in, copied verbatim
// from the npm package; docsui/README.md says which version and how to
// refresh them (`make docs-assets`).
//
//go:embed docsui/web-components.min.js docsui/styles.min.css
var docsUI embed.FS

const (
	docsPath       = "/docs"
	docsAssetsPath = "/docs/assets/"
	// docsSpecPath is the document the page renders: huma serves it
	// (Config.OpenAPIPath + ".yaml").
	docsSpecPath = "/openapi.yaml"
)

// docsCSP lets the page load only what this server serves. Elements
// styles its components inline, hence 'unsafe-inline' for styles.
var docsCSP = strings.Join([]string{
	"default-src 'none'",
	"base-uri 'none'",
	"connect-src 'self'",
	"form-action 'none'",
	"frame-ancestors 'none'",
	"sandbox allow-same-origin allow-scripts",
	"script-src 'self'",
	"style-src 'self' 'unsafe-inline'",
	"img-src 'self' data:",
	"font-src 'self' data:",
}, "; ")

// docsAsset is one embedded file, with the hash that versions its URL.
type docsAsset struct {
	body      []byte
	ctype     string
	hash      string // hex sha256, the ?v= of its URL and its ETag
	integrity string // subresource integrity (sha384)
}

func (a docsAsset) url(name string) string { return docsAssetsPath + name + "?v=" + a.hash[:16] }

type docsSite struct {
	assets map[string]docsAsset
	page   []byte
}

// docsFiles reads the embedded files and renders the page once per
// process; both are immutable afterwards.
var docsFiles = sync.OnceValue(func() docsSite {
	site := docsSite{assets: map[string]docsAsset{}}
	for name, ctype := range map[string]string{
		"web-components.min.js": "text/javascript; charset=utf-8",
		"styles.min.css":        "text/css; charset=utf-8",
	} {
		b, err := docsUI.ReadFile("docsui/" + name)
		if err != nil {
			panic("api: embedded docs asset missing: " + err.Error()) // go:embed guarantees it
		}
		sum := sha256.Sum256(b)
		sri := sha512.Sum384(b)
		site.assets[name] = docsAsset{body: b, ctype: ctype, hash: hex.EncodeToString(sum[:]),
			integrity: "sha384-" + base64.StdEncoding.EncodeToString(sri[:])}
	}
	css, js := site.assets["styles.min.css"], site.assets["web-components.min.js"]
	site.page = []byte(`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="referrer" content="no-referrer">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Trainyard API Reference</title>
    <link rel="stylesheet" href="` + css.url("styles.min.css") + `" integrity="` + css.integrity + `">
    <script src="` + js.url("web-components.min.js") + `" integrity="` + js.integrity + `"></script>
  </head>
  <body style="height: 100vh;">
    <elements-api
      apiDescriptionUrl="` + docsSpecPath + `"
      router="hash"
      layout="sidebar"
      tryItCredentialsPolicy="same-origin"
    ></elements-api>
  </body>
</html>
`)
	return site
})

// registerDocs serves the API reference page and its assets on the mux
// (huma's own docs route is off: Config.DocsPath is empty).
func (s *Server) registerDocs() {
	s.mux.HandleFunc("GET "+docsPath, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", docsCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(docsFiles().page))
	})
	s.mux.HandleFunc("GET "+docsAssetsPath+"{name}", func(w http.ResponseWriter, r *http.Request) {
		a, ok := docsFiles().assets[r.PathValue("name")]
		if !ok {
			writeProblem(w, http.StatusNotFound, "no such docs asset: "+r.URL.Path)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("ETag", `"`+a.hash+`"`)
		if r.URL.Query().Get("v") == a.hash[:16] {
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			h.Set("Cache-Control", "no-cache")
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
	})
}
