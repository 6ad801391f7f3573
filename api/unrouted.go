package api

import (
	"encoding/json"
	"net/http"
)

// serveMux routes r, answering what no operation handles (an unknown path,
// a method the path lacks, a name no resource can have) with a problem
// document too, like every other error of the API.
func (s *Server) serveMux(w http.ResponseWriter, r *http.Request) {
	if !printableASCII(r.URL.Path) {
		// Every name Trainyard gives out is printable ASCII; Temporal's
		// client refuses others before asking, which would read as an outage.
		writeProblem(w, http.StatusNotFound, "no such resource: names and ids are printable ASCII")
		return
	}
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	// The mux's own answer (404, 405 with Allow, a redirect) in plain text:
	// keep its status and headers, replace the body.
	rec := &headerRecorder{header: http.Header{}, status: http.StatusOK}
	h.ServeHTTP(rec, r)
	if rec.status < 400 {
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		return
	}
	if allow := rec.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	detail := "no such route: " + r.URL.Path
	if rec.status == http.StatusMethodNotAllowed {
		detail = r.Method + " is not allowed on " + r.URL.Path + " (allowed: " + rec.header.Get("Allow") + ")"
	}
	writeProblem(w, rec.status, detail)
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// writeProblem writes an RFC 9457 problem document outside huma.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"title": http.StatusText(status), "status": status, "detail": detail})
}

// headerRecorder keeps a handler's status and headers, drops its body.
type headerRecorder struct {
	header http.Header
	status int
	wrote  bool
}

func (h *headerRecorder) Header() http.Header { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	return len(b), nil
}
func (h *headerRecorder) WriteHeader(code int) {
	if !h.wrote {
		h.status, h.wrote = code, true
	}
}
