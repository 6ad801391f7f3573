package objstore

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// watch is the S3 client's transport: it keeps when the oldest request
// S3 has not answered began, and the last error one met, so that work
// blocked behind an unreachable S3 (the client retries for minutes) can
// say why instead of looking stuck.
type watch struct {
	next http.RoundTripper
	now  func() time.Time

	mu       sync.Mutex
	inflight map[uint64]time.Time
	seq      uint64
	since    time.Time // the oldest request not answered since the last answer; zero when none
	lastErr  error
	errAt    time.Time
}

func newWatch(next http.RoundTripper) *watch {
	return &watch{next: next, now: time.Now, inflight: map[uint64]time.Time{}}
}

func (w *watch) RoundTrip(r *http.Request) (*http.Response, error) {
	w.mu.Lock()
	w.seq++
	id, at := w.seq, w.now()
	w.inflight[id] = at
	if w.since.IsZero() {
		w.since = at
	}
	w.mu.Unlock()
	resp, err := w.next.RoundTrip(r)
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.inflight, id)
	if err != nil {
		w.lastErr, w.errAt = err, w.now()
		return resp, err
	}
	// An answer (any status): S3 is there. Requests still in flight
	// began no earlier than the oldest of them.
	w.since, w.lastErr = time.Time{}, nil
	for _, t := range w.inflight {
		if w.since.IsZero() || t.Before(w.since) {
			w.since = t
		}
	}
	return resp, err
}

// stalled says why S3 has not answered for longer than after ("" when it
// has): a request in flight that long, or requests failing since then
// (the client backing off between retries) with the last one under a
// minute ago.
func (w *watch) stalled(after time.Duration) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if w.since.IsZero() || now.Sub(w.since) < after || (len(w.inflight) == 0 && now.Sub(w.errAt) > time.Minute) {
		return ""
	}
	s := fmt.Sprintf("S3 has not answered for %s", now.Sub(w.since).Round(time.Second))
	if w.lastErr != nil {
		s += fmt.Sprintf(" (%v)", w.lastErr)
	}
	return s
}
