package objstore

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rt answers each request with what its next value says: nil an answer,
// an error that error; block, when set, holds a request until released.
type rt struct {
	errs  chan error
	block chan struct{}
}

func (f *rt) RoundTrip(*http.Request) (*http.Response, error) {
	if f.block != nil {
		<-f.block
	}
	if err := <-f.errs; err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

// TestStalled: S3 is stalled from the oldest request it has not answered,
// with the last error, and not once any request is answered; a failure
// long past with nothing in flight is not reported.
func TestStalled(t *testing.T) {
	clock := time.Unix(1000, 0)
	f := &rt{errs: make(chan error, 8)}
	w := newWatch(f)
	w.now = func() time.Time { return clock }
	req, _ := http.NewRequest("GET", "http://s3/b", nil)
	do := func(err error) {
		f.errs <- err
		w.RoundTrip(req)
	}
	if s := w.stalled(10 * time.Second); s != "" {
		t.Fatalf("fresh: %q", s)
	}
	cut := errors.New("dial tcp 198.18.0.1:9000: i/o timeout")
	do(cut)
	clock = clock.Add(5 * time.Second)
	if s := w.stalled(10 * time.Second); s != "" {
		t.Errorf("after 5 s: %q", s)
	}
	clock = clock.Add(10 * time.Second)
	do(cut) // a retry, failing too
	if s := w.stalled(10 * time.Second); !strings.Contains(s, "for 15s") || !strings.Contains(s, "i/o timeout") {
		t.Errorf("after 15 s of failures: %q", s)
	}
	clock = clock.Add(2 * time.Minute)
	if s := w.stalled(10 * time.Second); s != "" {
		t.Errorf("nothing asked for 2 min: %q", s)
	}
	do(nil)
	if s := w.stalled(10 * time.Second); s != "" {
		t.Errorf("answered: %q", s)
	}

	// A request in flight for 20 s, no error yet.
	f.block = make(chan struct{})
	done := make(chan struct{})
	go func() { f.errs <- nil; w.RoundTrip(req); close(done) }()
	for {
		w.mu.Lock()
		n := len(w.inflight)
		w.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	w.mu.Lock()
	clock = clock.Add(20 * time.Second)
	w.mu.Unlock()
	if s := w.stalled(10 * time.Second); !strings.Contains(s, "for 20s") || strings.Contains(s, "(") {
		t.Errorf("in flight 20 s: %q", s)
	}
	close(f.block)
	<-done
	if s := w.stalled(10 * time.Second); s != "" {
		t.Errorf("answered at last: %q", s)
	}
}
