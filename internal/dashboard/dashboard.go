// Package dashboard is the web dashboard at /ui: one HTML shell, app.js
// and app.css, and uPlot for the charts, all embedded in the binary so
// that it works in a lab without internet. It is a view over the /v1 API,
// not a second API: the page signs in with an API token (viewer suffices),
// keeps it in the tab's sessionStorage (or localStorage when asked to
// remember it) and sends it as `Authorization: Bearer` on every fetch. A
// link may carry the token in its fragment (/ui/runs#token=ty_...): the
// page moves it into sessionStorage and strips it from the address; a
// fragment never reaches a server or a Referer header.
//
// ui/uplot/README.md says where uPlot came from and how `make ui-assets`
// refreshes it.
package dashboard

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"

	"github.com/trainyard/trainyard/internal/webasset"
)

//go:embed ui/index.html ui/app.js ui/app.css ui/uplot/uPlot.iife.min.js ui/uplot/uPlot.min.css
var files embed.FS

const (
	// Path is the dashboard's root; its pages lie below it (/ui/runs/ID).
	Path = "/ui"
	// AssetsPath serves the embedded files, versioned by content hash.
	AssetsPath = Path + "/assets/"
)

// csp lets the page load only what this server serves and talk only to it.
// uPlot sizes its elements through style attributes, hence 'unsafe-inline'
// for styles (never for scripts). Links into the Temporal UI open in a new
// tab, hence allow-popups.
var csp = webasset.CSP(
	"default-src 'none'",
	"base-uri 'none'",
	"connect-src 'self'",
	"form-action 'none'",
	"frame-ancestors 'none'",
	"sandbox allow-same-origin allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox",
	"script-src 'self'",
	"style-src 'self' 'unsafe-inline'",
	"img-src 'self' data:",
)

// Options are what the page needs to know beyond the API.
type Options struct {
	// TemporalUI is the Temporal Web UI's base URL (dev's, or `server
	// --temporal-ui-url`); empty: the pages show no links into it.
	TemporalUI string
	// Namespace is the Temporal namespace of Trainyard's workflows.
	Namespace string
}

// Site is the rendered shell page and the assets it loads.
type Site struct {
	assets *webasset.Set
	page   []byte
}

var shell = template.Must(template.ParseFS(files, "ui/index.html"))

// New renders the shell for o.
func New(o Options) *Site {
	s := &Site{assets: webasset.MustLoad(files, "ui", AssetsPath, map[string]string{
		"app.js":                  "text/javascript; charset=utf-8",
		"app.css":                 "text/css; charset=utf-8",
		"uplot/uPlot.iife.min.js": "text/javascript; charset=utf-8",
		"uplot/uPlot.min.css":     "text/css; charset=utf-8",
	})}
	type asset struct{ URL, Integrity string }
	get := func(name string) asset {
		a, _ := s.assets.Get(name)
		return asset{s.assets.URL(name), a.Integrity}
	}
	var b bytes.Buffer
	err := shell.Execute(&b, map[string]any{
		"TemporalUI": o.TemporalUI, "Namespace": o.Namespace,
		"AppJS": get("app.js"), "AppCSS": get("app.css"),
		"UPlotJS": get("uplot/uPlot.iife.min.js"), "UPlotCSS": get("uplot/uPlot.min.css"),
	})
	if err != nil {
		panic("dashboard: render the shell: " + err.Error()) // a bug in index.html
	}
	s.page = b.Bytes()
	return s
}

// ServePage answers every page of the dashboard with the shell; app.js
// reads the path and renders the page from the API.
func (s *Site) ServePage(w http.ResponseWriter, r *http.Request) {
	webasset.ServePage(w, r, csp, s.page)
}

// ServeAsset answers GET AssetsPath+name; false when there is no such file.
func (s *Site) ServeAsset(w http.ResponseWriter, r *http.Request, name string) bool {
	return s.assets.Serve(w, r, name)
}
