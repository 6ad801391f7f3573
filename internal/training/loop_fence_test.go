package training

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/trainyard/trainyard/internal/trajpool"
)

// TestPoolRefusesSupersededWorkers: a loop trainer placed again got the
// address and port its predecessor had (the same node, the same free
// port). A rollout worker of the predecessor, cut off while the gang moved
// and healed since, still holds the old pool URL: its puts and ledger
// reads are refused (409, counted), while the new placement's workers
// reach the pool and the endpoints' versions under the new path.
func TestPoolRefusesSupersededWorkers(t *testing.T) {
	pool, err := trajpool.New(trajpool.Options{Name: "fence", Capacity: 8, Dedup: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var superseded atomic.Int64
	srv := httptest.NewServer(poolServer(pool, nil, "/placement/2", &superseded))
	defer srv.Close()
	ctx := context.Background()
	traj := func(e int64) trajpool.Trajectory {
		return trajpool.Trajectory{Worker: "w0", Episode: e, Seed: uint64(e), Steps: []trajpool.Step{{}}}
	}

	for _, url := range []string{srv.URL + "/placement/1", srv.URL + "/placement/12", srv.URL} {
		late := &trajpool.Client{URL: url}
		if err := late.Put(ctx, traj(1)); err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "superseded") {
			t.Errorf("a put to %s: %v, want refused as superseded", url, err)
		}
	}
	if n := superseded.Load(); n != 3 {
		t.Errorf("superseded counts %d refusals, want 3", n)
	}
	if st := pool.Stats(); st.Put != 0 {
		t.Fatalf("the pool took %d trajectories from a superseded trainer's workers", st.Put)
	}

	current := &trajpool.Client{URL: srv.URL + "/placement/2"}
	if err := current.Put(ctx, traj(2)); err != nil {
		t.Fatalf("the current placement's worker: %v", err)
	}
	if l, err := current.Accepted(ctx); err != nil || !l.Has(2) || l.Has(1) {
		t.Fatalf("ledger under the new path: %v (err %v), want episode 2 only", l, err)
	}
	res, err := http.Get(srv.URL + "/placement/2" + VersionsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v map[string]int64
	if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&v) != nil {
		t.Fatalf("versions under the new path: %s", res.Status)
	}
}
