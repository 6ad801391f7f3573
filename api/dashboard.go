package api

import (
	"net/http"

	"github.com/trainyard/trainyard/internal/dashboard"
)

// registerDashboard serves the web dashboard (internal/dashboard) on the
// mux, outside the OpenAPI document: its pages are HTML and read the /v1
// API with the user's token like any other client.
func (s *Server) registerDashboard() {
	site := dashboard.New(dashboard.Options{TemporalUI: s.d.TemporalUI, Namespace: s.d.Namespace})
	s.mux.HandleFunc("GET "+dashboard.Path, site.ServePage)
	s.mux.HandleFunc("GET "+dashboard.Path+"/{page...}", site.ServePage)
	s.mux.HandleFunc("GET "+dashboard.AssetsPath+"{name...}", func(w http.ResponseWriter, r *http.Request) {
		if !site.ServeAsset(w, r, r.PathValue("name")) {
			writeProblem(w, http.StatusNotFound, "no such dashboard asset: "+r.URL.Path)
		}
	})
}
