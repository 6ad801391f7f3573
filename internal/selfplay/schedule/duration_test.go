package schedule

import (
	"testing"
	"time"
)

func TestDurations(t *testing.T) {
	for _, tc := range []struct {
		name         string
		samples      []time.Duration
		mean, stddev time.Duration
	}{
		{"none", nil, 0, 0},
		{"one", []time.Duration{10 * time.Second}, 10 * time.Second, 0},
		// 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sample variance 32/7.
		{"eight", []time.Duration{2e9, 4e9, 4e9, 4e9, 5e9, 5e9, 7e9, 9e9}, 5 * time.Second, 2138089935},
		{"constant", []time.Duration{time.Minute, time.Minute, time.Minute}, time.Minute, 0},
	} {
		var d Durations
		for _, s := range tc.samples {
			d.Add(s)
		}
		mean, p90 := d.Predict()
		if (mean-tc.mean).Abs() > time.Millisecond || (d.Stddev()-tc.stddev).Abs() > time.Millisecond {
			t.Errorf("%s: mean %v stddev %v, want %v %v", tc.name, mean, d.Stddev(), tc.mean, tc.stddev)
		}
		if want := tc.mean + time.Duration(1.28*float64(tc.stddev)); (p90 - want).Abs() > time.Millisecond {
			t.Errorf("%s: p90 %v, want %v", tc.name, p90, want)
		}
	}
}
