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
		c    ConfigStat
		all  []ConfigStat
		want float64
	}{
		{"plain", ConfigStat{Config: "a", LastRun: recent}, nil, 1},
		{"weight", ConfigStat{Config: "a", Weight: 2, LastRun: recent}, nil, 2},
		{"velocity 10 doubles", ConfigStat{Config: "a", Velocity: 10, LastRun: recent}, nil, 2},
		{"negative velocity counts as none", ConfigStat{Config: "a", Velocity: -50, LastRun: recent}, nil, 1},
		{"never run", ConfigStat{Config: "a"}, nil, 3},
		{"starved 4h", ConfigStat{Config: "a", LastRun: now.Add(-4 * time.Hour)}, nil, 3},
		{"not yet starved", ConfigStat{Config: "a", LastRun: now.Add(-3*time.Hour - 59*time.Minute)}, nil, 1},
		{"bad quality", ConfigStat{Config: "a", LastRun: recent, Quality: 0.5, QualityKnown: true}, nil, 0.5},
		{"good quality", ConfigStat{Config: "a", LastRun: recent, Quality: 0.9, QualityKnown: true}, nil, 1},
		{"over quota", ConfigStat{Config: "a", LastRun: recent, Quota: 0.25, Slices: 3}, []ConfigStat{{Slices: 3}, {Slices: 5}}, 0.1},
		{"within quota", ConfigStat{Config: "a", LastRun: recent, Quota: 0.5, Slices: 3}, []ConfigStat{{Slices: 3}, {Slices: 5}}, 1},
		{"done", ConfigStat{Config: "a", TargetElo: 1400, BestElo: 1450}, nil, 0},
		{"running", ConfigStat{Config: "a", Running: true}, nil, 0},
		{"disabled", ConfigStat{Config: "a", Disabled: "loop failed"}, nil, 0},
	} {
		got := Priority(tc.c, tc.all, now, Tuning{})
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
		all  []ConfigStat
		want string
	}{
		{"fastest climber", []ConfigStat{{Config: "hex8_2p", LastRun: recent, Velocity: 2}, {Config: "square8_2p", LastRun: recent, Velocity: 30}}, "square8_2p"},
		{"curriculum outweighs", []ConfigStat{{Config: "hex8_2p", LastRun: recent, Weight: 5}, {Config: "square8_2p", LastRun: recent, Velocity: 30}}, "hex8_2p"},
		{"starved config boosted", []ConfigStat{{Config: "hex8_2p", LastRun: now.Add(-5 * time.Hour)}, {Config: "square8_2p", LastRun: recent, Velocity: 15}}, "hex8_2p"},
		{"new config first", []ConfigStat{{Config: "b", LastRun: recent, Velocity: 15}, {Config: "a"}}, "a"},
		{"ties by name", []ConfigStat{{Config: "b", LastRun: recent}, {Config: "a", LastRun: recent}}, "a"},
		{"all done or running", []ConfigStat{{Config: "a", Running: true}, {Config: "b", TargetElo: 1, BestElo: 2}}, ""},
		{"none", nil, ""},
	} {
		if got := Pick(tc.all, now, Tuning{}); got != tc.want {
			t.Errorf("%s: picked %q, want %q (%+v)", tc.name, got, tc.want, Rank(tc.all, now, Tuning{}))
		}
	}
}
