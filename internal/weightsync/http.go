package weightsync

import (
	"encoding/json"
	"net/http"
	"os"

	"github.com/trainyard/trainyard/internal/checkpoint"
)

// Handler lets a bring-your-own trainer on the same node publish weights:
// POST /v1/weights {"dir": "/path/to/weights", "iteration": 12} saves the
// directory as the next weights checkpoint, notifies the endpoints and
// answers the Published document; published, when set, sees it first (e.g.
// to set the trajectory pool's weight version). The directory is read by
// this process, so the trainer must share its filesystem (seed 003's
// colocated trainer and weight-sync controller).
func Handler(s *Syncer, published func(Published)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/weights", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Dir       string `json:"dir"`
			Iteration int64  `json:"iteration"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil || req.Dir == "" {
			problem(w, http.StatusBadRequest, `want {"dir": "...", "iteration": n}`)
			return
		}
		if fi, err := os.Stat(req.Dir); err != nil || !fi.IsDir() {
			problem(w, http.StatusBadRequest, "dir "+req.Dir+" is not a directory here")
			return
		}
		p, err := s.Publish(r.Context(), req.Dir, checkpoint.Meta{Iteration: req.Iteration})
		if err != nil {
			problem(w, http.StatusBadGateway, err.Error())
			return
		}
		if published != nil {
			published(p)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p)
	})
	return mux
}

func problem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"title": http.StatusText(status), "status": status, "detail": detail})
}
