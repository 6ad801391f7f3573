package main

import (
	"testing"
	"time"
)

// TestBackoff: an undelivered signal waits 1, 2, then at most 4 beats,
// ±25%, so a fleet turned away at once is not back at once, and not gone
// for long.
func TestBackoff(t *testing.T) {
	every := 5 * time.Second
	for _, tc := range []struct {
		fails int
		beats float64
	}{{1, 1}, {2, 2}, {3, 4}, {4, 4}, {50, 4}} {
		lo, hi := time.Duration(tc.beats*0.75*float64(every)), time.Duration(tc.beats*1.25*float64(every))
		seen := map[time.Duration]bool{}
		for range 200 {
			d := backoff(every, tc.fails)
			if d < lo || d > hi {
				t.Fatalf("backoff after %d failures: %v, want within [%v, %v]", tc.fails, d, lo, hi)
			}
			seen[d] = true
		}
		if len(seen) < 100 {
			t.Fatalf("backoff after %d failures: %d distinct waits in 200, want them jittered", tc.fails, len(seen))
		}
	}
}
