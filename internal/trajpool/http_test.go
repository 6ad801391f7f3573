package trajpool

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHTTP: workers in other processes push over HTTP and block while the
// pool is full; a trainer pulls batches, sets its weight version and reads
// the counters; bad requests are problem documents.
func TestHTTP(t *testing.T) {
	p, _ := newPool(t, Options{Name: "http", Capacity: 2})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: Handler(p, 0)}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	base := "http://" + l.Addr().String()

	var wg sync.WaitGroup
	for e := range 6 {
		wg.Go(func() {
			b, _ := json.Marshal(Trajectory{Worker: "remote", Episode: int64(e), WeightVersion: 1, Steps: []Step{{Obs: []float32{1}, Action: []float32{0}, Reward: 1}}})
			res, err := http.Post(base+"/v1/trajectories", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			if res.StatusCode != http.StatusNoContent {
				t.Errorf("put: %s", res.Status)
			}
		})
	}
	for p.Stats().BlockedPuts == 0 {
		runtime.Gosched() // until a remote put is held back by the full pool
	}
	req, _ := http.NewRequest(http.MethodPut, base+"/v1/weight-version", bytes.NewReader([]byte(`{"version":3}`)))
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("set version: %v %v", res, err)
	}
	seen := map[int64]bool{}
	for len(seen) < 6 {
		res, err := http.Get(base + "/v1/batch?n=2&wait=10s")
		if err != nil {
			t.Fatal(err)
		}
		var b []Trajectory
		if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&b) != nil || len(b) != 2 {
			t.Fatalf("batch: %s %v", res.Status, b)
		}
		res.Body.Close()
		for _, tr := range b {
			seen[tr.Episode] = true
			if tr.Steps[0].Reward != 1 || tr.WeightVersion != 1 {
				t.Fatalf("trajectory did not survive the trip: %+v", tr)
			}
		}
	}
	wg.Wait()
	res, err := http.Get(base + "/v1/stats")
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]float64
	json.NewDecoder(res.Body).Decode(&st)
	res.Body.Close()
	t.Logf("stats %v", st)
	if st["taken"] != 6 || st["blocked_puts"] == 0 || st["max_lag"] != 2 {
		t.Errorf("stats %v: want 6 taken, blocked puts, max lag 2", st)
	}
	if res, _ := http.Get(base + "/v1/batch?n=1&wait=10ms"); res.StatusCode != http.StatusNoContent {
		t.Errorf("empty pool batch: %s, want 204", res.Status)
	}
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/batch?n=0", ""},
		{"GET", "/v1/batch?n=1&wait=forever", ""},
		{"POST", "/v1/trajectories", `{"episode":"one"}`},
		{"POST", "/v1/trajectories", `{"unknown":1}`},
		{"PUT", "/v1/weight-version", `{}`},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, bytes.NewReader([]byte(tc.body)))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || res.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s %s: %s %s, want a 400 problem", tc.method, tc.path, tc.body, res.Status, res.Header.Get("Content-Type"))
		}
	}
}

// TestClient: a worker's client waits while the pool is away (reporting
// why), delivers once it is up, and reads the accepted episodes.
func TestClient(t *testing.T) {
	p, _ := newPool(t, Options{Name: "client", Capacity: 4, Dedup: true})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // away for now
	var mu sync.Mutex
	var reasons []string
	c := &Client{URL: "http://" + addr, Waiting: func(r string) { mu.Lock(); reasons = append(reasons, r); mu.Unlock() }}
	done := make(chan error, 1)
	go func() { done <- c.Put(t.Context(), Trajectory{Episode: 7}) }()
	time.Sleep(300 * time.Millisecond)
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	srv := &http.Server{Handler: Handler(p, 0)}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := c.Put(t.Context(), Trajectory{Episode: 7}); err != nil { // a retried put
		t.Fatal(err)
	}
	acc, err := c.Accepted(t.Context())
	if err != nil || acc.Len() != 1 || !acc.Has(7) {
		t.Fatalf("accepted %v %v", acc.r, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reasons) < 2 || !strings.Contains(reasons[0], "waiting for the trajectory pool") || reasons[len(reasons)-1] != "" {
		t.Fatalf("reasons %q", reasons)
	}
	if st := p.Stats(); st.Put != 1 || st.Duplicates != 1 {
		t.Fatalf("pool %+v", st)
	}
}
