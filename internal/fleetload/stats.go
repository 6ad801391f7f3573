package fleetload

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Latency summarises one kind of call. Durations are in milliseconds so
// that the JSON reads without units.
type Latency struct {
	Count  int     `json:"count"`
	Errors int     `json:"errors"`
	P50MS  float64 `json:"p50_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
}

// samples collects durations from many goroutines.
type samples struct {
	mu     sync.Mutex
	d      []time.Duration
	errors int
}

func (s *samples) add(d time.Duration, err bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err {
		s.errors++
		return
	}
	s.d = append(s.d, d)
}

func (s *samples) summary() Latency {
	s.mu.Lock()
	defer s.mu.Unlock()
	return summarize(s.d, s.errors)
}

// summarize sorts a copy of d: callers keep adding to theirs.
func summarize(d []time.Duration, errors int) Latency {
	sorted := slices.Clone(d)
	slices.Sort(sorted)
	l := Latency{Count: len(sorted), Errors: errors}
	if len(sorted) == 0 {
		return l
	}
	l.P50MS = ms(percentile(sorted, 0.50))
	l.P99MS = ms(percentile(sorted, 0.99))
	l.MaxMS = ms(sorted[len(sorted)-1])
	return l
}

// percentile is the nearest-rank percentile of sorted (q in [0,1]).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Millisecond)*10) / 10 }

// peakRate is the most events of times (any order) within any window of
// length w, per second: what a burst sustained, where count/span is the
// average diluted by idle stretches.
func peakRate(times []time.Time, w time.Duration) float64 {
	if len(times) == 0 || w <= 0 {
		return 0
	}
	sorted := slices.Clone(times)
	slices.SortFunc(sorted, func(a, b time.Time) int { return a.Compare(b) })
	best, lo := 0, 0
	for hi := range sorted {
		for sorted[hi].Sub(sorted[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return float64(best) / w.Seconds()
}

// spanRate is len(times) over the time from the first to the last.
func spanRate(times []time.Time) float64 {
	if len(times) < 2 {
		return 0
	}
	lo, hi := slices.MinFunc(times, time.Time.Compare), slices.MaxFunc(times, time.Time.Compare)
	if span := hi.Sub(lo).Seconds(); span > 0 {
		return float64(len(times)) / span
	}
	return 0
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }
