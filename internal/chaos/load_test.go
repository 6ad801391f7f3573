package chaos

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/plugintest"
)

const loadClients = 200

// loadTest: 200 clients at once each submit a run and poll its status
// five times. Every submission is admitted (201) or cleanly refused (a
// 4xx problem document, e.g. a quota, or a 429 "busy, retry after"); a
// status poll answered 429 is retried after its Retry-After and must then
// answer; nothing is a 5xx or a transport error. Latencies are reported,
// not asserted.
func loadTest(t *testing.T, p *plane) {
	uploadPlugin(t, p, plugintest.BuildGo(t, "./plugins/cartpole"))
	type sample struct {
		op   string
		code int
		d    time.Duration
	}
	var (
		mu      sync.Mutex
		samples []sample
		ids     []string
		wg      sync.WaitGroup
	)
	gate := make(chan struct{})
	record := func(op string, code int, d time.Duration, hdr http.Header, raw []byte, err error) {
		mu.Lock()
		defer mu.Unlock()
		samples = append(samples, sample{op, code, d})
		if err != nil {
			t.Errorf("%s: %v", op, err)
			return
		}
		checkAnswer(t, op, code, hdr, raw)
	}
	started := time.Now()
	for i := range loadClients {
		wg.Go(func() {
			<-gate
			body := fmt.Sprintf(`{"cluster":"lab","env":"CartPole-v1","iterations":50,"seed":%d}`, i+1)
			t0 := time.Now()
			code, hdr, raw, err := p.do("POST", "/v1/runs", p.admin, "application/json", []byte(body))
			record("submit", code, time.Since(t0), hdr, raw, err)
			if code != http.StatusCreated {
				return
			}
			var ref struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(raw, &ref) != nil || ref.ID == "" {
				t.Errorf("submit answered %s", raw)
				return
			}
			mu.Lock()
			ids = append(ids, ref.ID)
			mu.Unlock()
			for range 5 {
				// A 429 says "busy, retry after N s" (a clean answer, in
				// the table): the client retries then, as a client would.
				for attempt := 1; ; attempt++ {
					t0 := time.Now()
					code, hdr, raw, err := p.do("GET", "/v1/runs/"+ref.ID, p.admin, "", nil)
					record("status", code, time.Since(t0), hdr, raw, err)
					if code == http.StatusTooManyRequests && attempt < 3 {
						wait, _ := strconv.Atoi(hdr.Get("Retry-After"))
						time.Sleep(time.Duration(max(wait, 1)) * time.Second)
						continue
					}
					if code != http.StatusOK {
						t.Errorf("status of admitted run %s (attempt %d): %d %s", ref.ID, attempt, code, raw)
					}
					break
				}
			}
		})
	}
	close(gate)
	wg.Wait()
	wall := time.Since(started)

	var b strings.Builder
	fmt.Fprintf(&b, "load: %d concurrent clients against trainyard dev in %.1f s\n", loadClients, wall.Seconds())
	for _, op := range []string{"submit", "status"} {
		var ds []time.Duration
		codes := map[int]int{}
		for _, s := range samples {
			if s.op == op {
				ds = append(ds, s.d)
				codes[s.code]++
			}
		}
		slices.Sort(ds)
		keys := make([]int, 0, len(codes))
		for c := range codes {
			keys = append(keys, c)
		}
		sort.Ints(keys)
		var cs []string
		for _, c := range keys {
			cs = append(cs, fmt.Sprintf("%d×%d", c, codes[c]))
		}
		fmt.Fprintf(&b, "  %-7s %4d requests  p50 %6.0f ms  p99 %6.0f ms  max %6.0f ms  statuses %s\n",
			op, len(ds), pct(ds, 0.50), pct(ds, 0.99), pct(ds, 1), strings.Join(cs, " "))
	}
	show(b.String())
	t.Log(b.String())
	if len(ids) == 0 {
		t.Error("not one of the submissions was admitted")
	}

	// Cancel what was admitted, so the dev is quiet again: 16 at a time
	// (one after another, each answered after a query of its run's state,
	// took 370 s of the test's 437 beside the e2e suite).
	sem := make(chan struct{}, 16)
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			code, _, raw, err := p.do("POST", "/v1/runs/"+id+"/cancel", p.admin, "", nil)
			if err != nil || code >= 300 {
				t.Errorf("cancel %s: %d %s %v", id, code, raw, err)
			}
		})
	}
	wg.Wait()
}

// pct is the q-quantile of sorted durations, in milliseconds.
func pct(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = min(max(i, 0), len(sorted)-1)
	return float64(sorted[i].Microseconds()) / 1000
}
