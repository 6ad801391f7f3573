package schedule

import (
	"math"
	"time"
)

// Durations tracks how long one kind of work takes (the seed's
// HistoricalJobTracker: per config the mean and variance of durations),
// with Welford's online update so the state stays three numbers.
type Durations struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_s" doc:"Mean duration in seconds."`
	M2   float64 `json:"m2" doc:"Sum of squared deviations (Welford)."`
}

// Add records one duration.
func (d *Durations) Add(x time.Duration) {
	s := x.Seconds()
	d.N++
	delta := s - d.Mean
	d.Mean += delta / float64(d.N)
	d.M2 += delta * (s - d.Mean)
}

// Stddev is the sample standard deviation (0 below two samples).
func (d Durations) Stddev() time.Duration {
	if d.N < 2 {
		return 0
	}
	return time.Duration(math.Sqrt(d.M2/float64(d.N-1)) * float64(time.Second))
}

// Predict is the expected duration and a pessimistic one (mean + 1.28 σ,
// the 90th percentile of a normal distribution); both 0 without samples.
func (d Durations) Predict() (expected, p90 time.Duration) {
	if d.N == 0 {
		return 0, 0
	}
	mean := time.Duration(d.Mean * float64(time.Second))
	return mean, mean + time.Duration(1.28*float64(d.Stddev()))
}
