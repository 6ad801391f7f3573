package trajpool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Handler serves a pool over HTTP so roles in other processes can use it:
// rollout workers POST /v1/trajectories (one JSON trajectory; the request
// waits while the pool is full under the block policy), a bring-your-own
// trainer GET /v1/batch?n=32&wait=30s (the n oldest, 204 if not enough
// arrive in time) and PUT /v1/weight-version {"version": v} after it
// publishes new weights; GET /v1/stats reports the counters and GET
// /v1/accepted the episodes accepted so far (a Ledger, for Dedup pools).
func Handler(p *Pool, maxBody int64) http.Handler {
	if maxBody <= 0 {
		maxBody = 16 << 20
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/trajectories", func(w http.ResponseWriter, r *http.Request) {
		var t Trajectory
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			problem(w, http.StatusBadRequest, "decode trajectory: "+err.Error())
			return
		}
		if err := p.Put(r.Context(), t); err != nil {
			status := http.StatusServiceUnavailable
			if errors.Is(err, ErrClosed) {
				status = http.StatusGone
			}
			problem(w, status, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/batch", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil || n < 1 || n > p.cap {
			problem(w, http.StatusBadRequest, fmt.Sprintf("n: want 1..%d", p.cap))
			return
		}
		wait := 30 * time.Second
		if s := r.URL.Query().Get("wait"); s != "" {
			if wait, err = time.ParseDuration(s); err != nil || wait < 0 || wait > 10*time.Minute {
				problem(w, http.StatusBadRequest, "wait: want a duration up to 10m")
				return
			}
		}
		ctx, cancel := contextWithTimeout(r, wait)
		defer cancel()
		b, err := p.Batch(ctx, n)
		switch {
		case errors.Is(err, ErrClosed):
			problem(w, http.StatusGone, err.Error())
			return
		case err != nil:
			w.WriteHeader(http.StatusNoContent) // not enough yet: ask again
			return
		}
		writeJSON(w, b)
	})
	mux.HandleFunc("PUT /v1/weight-version", func(w http.ResponseWriter, r *http.Request) {
		var v struct {
			Version *int64 `json:"version"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10)).Decode(&v); err != nil || v.Version == nil || *v.Version < 0 {
			problem(w, http.StatusBadRequest, `want {"version": n} with n ≥ 0`)
			return
		}
		p.SetWeightVersion(*v.Version)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		st := p.Stats()
		writeJSON(w, map[string]any{"depth": st.Depth, "put": st.Put, "taken": st.Taken, "dropped": st.Dropped,
			"blocked_puts": st.BlockedPuts, "blocked_seconds": st.BlockedTime.Seconds(), "max_lag": st.MaxLag,
			"duplicates": st.Duplicates, "stale": st.Stale, "lag": st.Lag})
	})
	mux.HandleFunc("GET /v1/accepted", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, p.Accepted())
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// problem writes an RFC 9457 problem document.
func problem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"title": http.StatusText(status), "status": status, "detail": detail})
}

func contextWithTimeout(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), d)
}
