package api

import (
	"embed"
	"net/http"
	"sync"

	"github.com/trainyard/trainyard/internal/webasset"
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
var docsCSP = webasset.CSP(
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
)

type docsSite struct {
	assets *webasset.Set
	page   []byte
}

// docsFiles reads the embedded files and renders the page once per
// process; both are immutable afterwards.
var docsFiles = sync.OnceValue(func() docsSite {
	site := docsSite{assets: webasset.MustLoad(docsUI, "docsui", docsAssetsPath, map[string]string{
		"web-components.min.js": "text/javascript; charset=utf-8",
		"styles.min.css":        "text/css; charset=utf-8",
	})}
	css, _ := site.assets.Get("styles.min.css")
	js, _ := site.assets.Get("web-components.min.js")
	site.page = []byte(`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="referrer" content="no-referrer">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Trainyard API Reference</title>
    <link rel="stylesheet" href="` + site.assets.URL("styles.min.css") + `" integrity="` + css.Integrity + `">
    <script src="` + site.assets.URL("web-components.min.js") + `" integrity="` + js.Integrity + `"></script>
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
		webasset.ServePage(w, r, docsCSP, docsFiles().page)
	})
	s.mux.HandleFunc("GET "+docsAssetsPath+"{name}", func(w http.ResponseWriter, r *http.Request) {
		if !docsFiles().assets.Serve(w, r, r.PathValue("name")) {
			writeProblem(w, http.StatusNotFound, "no such docs asset: "+r.URL.Path)
		}
	})
}
