package trajpool

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// metrics collects the pool's metrics as name → sum of data points
// (counters and gauges) or count (histograms).
func metrics(t *testing.T, r *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] += float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] += float64(p.Value)
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] += float64(p.Count)
					if v, ok := p.Max.Value(); ok {
						out[m.Name+".max"] = max(out[m.Name+".max"], float64(v))
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[m.Name] += float64(p.Count)
				}
			}
		}
	}
	return out
}

func newPool(t *testing.T, o Options) (*Pool, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	o.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p, r
}

// TestBackpressure: producers faster than the trainer block in Put once
// the pool is full; nothing is lost or reordered per producer, and the
// blocking shows in the metrics.
func TestBackpressure(t *testing.T) {
	p, r := newPool(t, Options{Name: "bp", Capacity: 4})
	const producers, each = 8, 25
	var wg sync.WaitGroup
	for w := range producers {
		wg.Go(func() {
			for e := range each {
				if err := p.Put(t.Context(), Trajectory{Worker: string(rune('a' + w)), Episode: int64(e)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	// The trainer starts only once a producer is blocked.
	for p.Stats().BlockedPuts == 0 {
		time.Sleep(time.Millisecond)
	}
	if d := p.Stats().Depth; d != 4 {
		t.Fatalf("depth %d while a put is blocked, want the capacity 4", d)
	}
	next := map[string]int64{}
	for taken := 0; taken < producers*each; {
		b, err := p.Batch(t.Context(), 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range b {
			if tr.Episode != next[tr.Worker] {
				t.Fatalf("worker %s: episode %d after %d", tr.Worker, tr.Episode, next[tr.Worker]-1)
			}
			next[tr.Worker]++
		}
		taken += len(b)
	}
	wg.Wait()
	st := p.Stats()
	m := metrics(t, r)
	t.Logf("stats %+v; metrics %v", st, m)
	if st.Dropped != 0 || st.Put != producers*each || st.Taken != producers*each || st.BlockedPuts == 0 || st.BlockedTime <= 0 {
		t.Errorf("stats %+v: want no drops, %d put and taken, blocked puts with blocked time", st, producers*each)
	}
	if m["trainyard.trajpool.blocked"] != float64(st.BlockedPuts) || m["trainyard.trajpool.blocked.duration"] == 0 ||
		m["trainyard.trajpool.put"] != producers*each || m["trainyard.trajpool.capacity"] != 4 {
		t.Errorf("metrics %v do not show the back-pressure", m)
	}
}

func TestPolicies(t *testing.T) {
	for _, tc := range []struct {
		name        string
		policy      Policy
		puts        int
		wantDropped int64
		wantFirst   int64 // episode of the oldest trajectory left
	}{
		{"drop oldest keeps the newest", DropOldest, 10, 6, 6},
		{"block below capacity never drops", Block, 4, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, r := newPool(t, Options{Name: tc.name, Capacity: 4, Policy: tc.policy})
			for e := range tc.puts {
				if err := p.Put(t.Context(), Trajectory{Episode: int64(e)}); err != nil {
					t.Fatal(err)
				}
			}
			b, err := p.Batch(t.Context(), 4)
			if err != nil {
				t.Fatal(err)
			}
			if st := p.Stats(); st.Dropped != tc.wantDropped || b[0].Episode != tc.wantFirst {
				t.Fatalf("dropped %d, oldest episode %d; want %d and %d", st.Dropped, b[0].Episode, tc.wantDropped, tc.wantFirst)
			}
			if m := metrics(t, r); m["trainyard.trajpool.dropped"] != float64(tc.wantDropped) {
				t.Errorf("dropped metric %v, want %d", m["trainyard.trajpool.dropped"], tc.wantDropped)
			}
		})
	}
	if _, err := New(Options{Policy: "lifo"}); err == nil {
		t.Error("unknown policy accepted")
	}
}

// TestOffPolicyLag: the lag of a taken trajectory is the trainer's version
// minus the version that produced it.
func TestOffPolicyLag(t *testing.T) {
	p, r := newPool(t, Options{Name: "lag", Capacity: 8})
	for _, v := range []int64{1, 2, 3, 3} {
		if err := p.Put(t.Context(), Trajectory{WeightVersion: v}); err != nil {
			t.Fatal(err)
		}
	}
	p.SetWeightVersion(3)
	b, err := p.Batch(t.Context(), 4)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{1, 2, 3, 3} {
		if b[i].WeightVersion != want {
			t.Fatalf("trajectory %d has version %d, want %d", i, b[i].WeightVersion, want)
		}
	}
	m := metrics(t, r)
	if p.Stats().MaxLag != 2 || m["trainyard.trajpool.offpolicy.lag"] != 4 || m["trainyard.trajpool.offpolicy.lag.max"] != 2 {
		t.Errorf("max lag %d, metrics %v; want 2 over 4 trajectories", p.Stats().MaxLag, m)
	}
}

func TestCancelAndClose(t *testing.T) {
	p, _ := newPool(t, Options{Capacity: 1})
	if err := p.Put(t.Context(), Trajectory{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- p.Put(ctx, Trajectory{}) }()
	for p.Stats().BlockedPuts == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked put after cancel: %v", err)
	}
	go func() { _, err := p.Batch(t.Context(), 1); done <- err }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	go func() { _, err := p.Batch(t.Context(), 1); done <- err }()
	p.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("batch after close: %v", err)
	}
	if err := p.Put(t.Context(), Trajectory{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("put after close: %v", err)
	}
}

// TestDedupAndSettled: a Dedup pool takes each episode once (a replay or a
// retried put is a duplicate), Settled leaves out what is still pooled,
// and a pool seeded with a settled ledger refuses those episodes again.
func TestDedupAndSettled(t *testing.T) {
	ctx := context.Background()
	p, _ := newPool(t, Options{Name: "dedup", Capacity: 8, Dedup: true})
	for _, e := range []int64{0, 1, 2, 1, 3, 0} {
		if err := p.Put(ctx, Trajectory{Episode: e}); err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Stats(); st.Put != 4 || st.Duplicates != 2 || st.Depth != 4 {
		t.Fatalf("stats %+v", st)
	}
	b, err := p.Batch(ctx, 2)
	if err != nil || b[0].Episode != 0 || b[1].Episode != 1 {
		t.Fatalf("batch %+v %v", b, err)
	}
	settled, accepted := p.Settled(), p.Accepted()
	if !settled.Has(0) || !settled.Has(1) || settled.Has(2) || settled.Len() != 2 || accepted.Len() != 4 {
		t.Fatalf("settled %v accepted %v", settled.r, accepted.r)
	}
	q, _ := newPool(t, Options{Name: "restored", Capacity: 8, Dedup: true, Accepted: settled})
	for _, e := range []int64{0, 1, 2, 3} {
		if err := q.Put(ctx, Trajectory{Episode: e}); err != nil {
			t.Fatal(err)
		}
	}
	if st := q.Stats(); st.Put != 2 || st.Duplicates != 2 {
		t.Fatalf("restored pool %+v: want 2 and 3 again, 0 and 1 as duplicates", st)
	}
}

// TestMaxLag: trajectories older than max_lag versions are discarded when
// a batch is taken, and the batch still has n fresh ones; lags are
// counted per bucket.
func TestMaxLag(t *testing.T) {
	ctx := context.Background()
	p, _ := newPool(t, Options{Name: "lag", Capacity: 8, MaxLag: 2})
	for e, v := range []int64{0, 1, 3, 4, 2, 4} {
		if err := p.Put(ctx, Trajectory{Episode: int64(e), WeightVersion: v}); err != nil {
			t.Fatal(err)
		}
	}
	p.SetWeightVersion(4)
	b, err := p.Batch(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if b[0].Episode != 2 || b[1].Episode != 3 || b[2].Episode != 4 {
		t.Fatalf("batch %+v: want episodes 2, 3, 4", b)
	}
	st := p.Stats()
	if st.Stale != 2 || st.Depth != 1 || st.Lag[0] != 1 || st.Lag[1] != 1 || st.Lag[2] != 1 || st.MaxLag != 2 {
		t.Fatalf("stats %+v", st)
	}
	// Not enough fresh ones: the batch waits, and gives back what it took.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := p.Batch(cctx, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("batch of 2 with 1 pooled: %v", err)
	}
	if st := p.Stats(); st.Depth != 1 {
		t.Fatalf("a batch that gave up kept %d trajectories", 1-st.Depth)
	}
}
