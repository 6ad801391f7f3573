package schedule

import (
	"math"
	"testing"
	"time"
)

func TestPriority(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	recent := now.Add(-time.Hour)
	for _, tc := range []struct {
		name string
		c    Config
		all  []Config
		want float64
	}{
		{"plain", Config{Config: "a", LastRun: recent}, nil, 1},
		{"weight", Config{Config: "a", Weight: 2, LastRun: recent}, nil, 2},
		{"velocity 10 doubles", Config{Config: "a", Velocity: 10, LastRun: recent}, nil, 2},
		{"negative velocity counts as none", Config{Config: "a", Velocity: -50, LastRun: recent}, nil, 1},
		{"never run", Config{Config: "a"}, nil, 3},
		{"starved 4h", Config{Config: "a", LastRun: now.Add(-4 * time.Hour)}, nil, 3},
		{"not yet starved", Config{Config: "a", LastRun: now.Add(-3*time.Hour - 59*time.Minute)}, nil, 1},
		{"bad quality", Config{Config: "a", LastRun: recent, Quality: 0.5, QualityKnown: true}, nil, 0.5},
		{"good quality", Config{Config: "a", LastRun: recent, Quality: 0.9, QualityKnown: true}, nil, 1},
		{"over quota", Config{Config: "a", LastRun: recent, Quota: 0.25, Slices: 3}, []Config{{Slices: 3}, {Slices: 5}}, 0.1},
		{"within quota", Config{Config: "a", LastRun: recent, Quota: 0.5, Slices: 3}, []Config{{Slices: 3}, {Slices: 5}}, 1},
		{"done", Config{Config: "a", TargetElo: 1400, BestElo: 1450}, nil, 0},
		{"running", Config{Config: "a", Running: true}, nil, 0},
	} {
		got := Priority(tc.c, tc.all, now, Options{})
		if math.Abs(got.Priority-tc.want) > 1e-9 || got.Why == "" {
			t.Errorf("%s: priority %v (%s), want %v", tc.name, got.Priority, got.Why, tc.want)
		}
	}
}

func TestPick(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	recent := now.Add(-time.Hour)
	for _, tc := range []struct {
		name string
		all  []Config
		want string
	}{
		{"fastest climber", []Config{{Config: "hex8_2p", LastRun: recent, Velocity: 2}, {Config: "square8_2p", LastRun: recent, Velocity: 30}}, "square8_2p"},
		{"curriculum outweighs", []Config{{Config: "hex8_2p", LastRun: recent, Weight: 5}, {Config: "square8_2p", LastRun: recent, Velocity: 30}}, "hex8_2p"},
		{"starved config boosted", []Config{{Config: "hex8_2p", LastRun: now.Add(-5 * time.Hour)}, {Config: "square8_2p", LastRun: recent, Velocity: 15}}, "hex8_2p"},
		{"new config first", []Config{{Config: "b", LastRun: recent, Velocity: 15}, {Config: "a"}}, "a"},
		{"ties by name", []Config{{Config: "b", LastRun: recent}, {Config: "a", LastRun: recent}}, "a"},
		{"all done or running", []Config{{Config: "a", Running: true}, {Config: "b", TargetElo: 1, BestElo: 2}}, ""},
		{"none", nil, ""},
	} {
		if got := Pick(tc.all, now, Options{}); got != tc.want {
			t.Errorf("%s: picked %q, want %q (%+v)", tc.name, got, tc.want, Rank(tc.all, now, Options{}))
		}
	}
}
