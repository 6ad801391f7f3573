package alerts

import (
	"testing"
	"time"
)

func TestObserve(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		at      time.Duration
		samples []Sample
		want    map[string]string // "rule subject" → state
	}
	for _, tc := range []struct {
		name  string
		th    Thresholds
		steps []step
	}{
		{"GPU below 50% fires after 30 min", Thresholds{}, []step{
			{0, []Sample{{GPUUtil, "n/0", 20}}, map[string]string{"gpu_utilization n/0": "pending"}},
			{29 * time.Minute, []Sample{{GPUUtil, "n/0", 40}}, map[string]string{"gpu_utilization n/0": "pending"}},
			{30 * time.Minute, []Sample{{GPUUtil, "n/0", 40}}, map[string]string{"gpu_utilization n/0": "firing"}},
		}},
		{"GPU recovering resets the clock", Thresholds{}, []step{
			{0, []Sample{{GPUUtil, "n/0", 20}}, map[string]string{"gpu_utilization n/0": "pending"}},
			{10 * time.Minute, []Sample{{GPUUtil, "n/0", 90}}, map[string]string{}},
			{35 * time.Minute, []Sample{{GPUUtil, "n/0", 20}}, map[string]string{"gpu_utilization n/0": "pending"}},
		}},
		{"an unmeasured subject is forgotten", Thresholds{}, []step{
			{0, []Sample{{GPUUtil, "n/0", 20}}, map[string]string{"gpu_utilization n/0": "pending"}},
			{time.Minute, nil, map[string]string{}},
			{31 * time.Minute, []Sample{{GPUUtil, "n/0", 20}}, map[string]string{"gpu_utilization n/0": "pending"}},
		}},
		{"throughput and queue depth fire at once", Thresholds{}, []step{
			{0, []Sample{{Throughput, "node-a", 12}, {Throughput, "node-b", 300}, {QueueDepth, "lab", 21}}, map[string]string{"selfplay_throughput node-a": "firing", "queue_depth lab": "firing"}},
			{time.Minute, []Sample{{QueueDepth, "lab", 20}}, map[string]string{}},
		}},
		{"Elo velocity below 1/day for 3 days", Thresholds{}, []step{
			{0, []Sample{{EloVelocity, "square8_2p", 0.5}, {EloVelocity, "hex8_2p", 4}}, map[string]string{"elo_velocity square8_2p": "pending"}},
			{71 * time.Hour, []Sample{{EloVelocity, "square8_2p", 0.2}}, map[string]string{"elo_velocity square8_2p": "pending"}},
			{72 * time.Hour, []Sample{{EloVelocity, "square8_2p", -3}}, map[string]string{"elo_velocity square8_2p": "firing"}},
		}},
		{"custom thresholds", Thresholds{QueueDepthAbove: 2, EloVelocityFor: time.Second}, []step{
			{0, []Sample{{QueueDepth, "lab", 3}, {EloVelocity, "c", 0}}, map[string]string{"queue_depth lab": "firing", "elo_velocity c": "pending"}},
			{time.Second, []Sample{{QueueDepth, "lab", 3}, {EloVelocity, "c", 0}}, map[string]string{"queue_depth lab": "firing", "elo_velocity c": "firing"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := Tracker{}
			for i, s := range tc.steps {
				got := tr.Observe(s.samples, t0.Add(s.at), tc.th)
				if len(got) != len(s.want) {
					t.Fatalf("step %d: %+v, want %v", i, got, s.want)
				}
				for _, a := range got {
					if s.want[a.Rule+" "+a.Subject] != a.State || a.Condition == "" || a.Since.IsZero() {
						t.Fatalf("step %d: %+v, want %v", i, a, s.want)
					}
				}
			}
		})
	}
}

func TestSinceIsWhenItStarted(t *testing.T) {
	t0 := time.Now()
	tr := Tracker{}
	tr.Observe([]Sample{{EloVelocity, "c", 0}}, t0, Thresholds{})
	got := tr.Observe([]Sample{{EloVelocity, "c", 0.3}}, t0.Add(time.Hour), Thresholds{})
	if !got[0].Since.Equal(t0) || got[0].Value != 0.3 {
		t.Fatalf("%+v", got[0])
	}
}
