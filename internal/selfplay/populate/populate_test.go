package populate

import (
	"strings"
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"nothing yet: only self-play can run", Config{}, Selfplay},
		{"an export waits: training is furthest below", Config{Done: Counts{Selfplay: 1}, Fresh: 1}, Training},
		{"queued self-play makes training possible", Config{Queue: []string{Selfplay}}, Training},
		{"training queued after the only export: self-play", Config{Done: Counts{Selfplay: 1}, Fresh: 1, Queue: []string{Training}}, Selfplay},
		{"no export left to train on", Config{Done: Counts{Selfplay: 1, Training: 2}}, Selfplay},
		{"candidate and tournament below 10%", Config{Done: Counts{Selfplay: 4, Training: 2}, Candidate: true}, Tournament},
		{"queued tournament rates the candidate", Config{Done: Counts{Selfplay: 4, Training: 2}, Candidate: true, Queue: []string{Tournament}}, Selfplay},
		{"tie self-play/tournament goes to self-play", Config{Done: Counts{Selfplay: 2, Training: 1}, Candidate: true, Fresh: 1}, Selfplay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, why := Next(tc.c, DefaultMix); got != tc.want {
				t.Fatalf("Next = %s (%s), want %s", got, why, tc.want)
			}
		})
	}
}

// TestNextConvergesToMix: a loop that runs whatever is queued ends up at
// the target mix.
func TestNextConvergesToMix(t *testing.T) {
	for _, mix := range []Mix{DefaultMix, {Selfplay: 0.5, Training: 0.25, Tournament: 0.25}} {
		c := Config{Done: Counts{}}
		var seq []string
		for range 100 {
			k, _ := Next(c, mix)
			seq = append(seq, k[:2])
			c.Done[k]++
			switch k {
			case Selfplay:
				c.Fresh++
			case Training:
				c.Fresh, c.Candidate = 0, true
			case Tournament:
				c.Candidate = false
			}
		}
		got := c.Done.Share()
		if d := got.Selfplay - mix.Selfplay; d > 0.02 || d < -0.02 {
			t.Fatalf("mix %v: got %v after %v", mix, got, seq)
		}
		if d := got.Tournament - mix.Tournament; d > 0.02 || d < -0.02 {
			t.Fatalf("mix %v: got %v", mix, got)
		}
	}
}

func TestPopulate(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	recent := now.Add(-time.Minute)
	for _, tc := range []struct {
		name  string
		cfgs  []Config
		tune  PopulatorTuning
		want  map[string]int // items queued per config
		first string         // config served first
		state map[string]string
	}{
		{
			name: "fills every config to depth",
			cfgs: []Config{{Config: "a", LastWork: recent}, {Config: "b", LastWork: recent}},
			want: map[string]int{"a": 3, "b": 3}, first: "a",
		},
		{
			name: "met target and closed loops get nothing",
			cfgs: []Config{
				{Config: "a", TargetElo: 1200, HasBest: true, BestElo: 1250, LastWork: recent},
				{Config: "b", Closed: "loop failed", LastWork: recent},
				{Config: "c", TargetElo: 1200, HasBest: true, BestElo: 1100, LastWork: recent},
			},
			want: map[string]int{"c": 3}, first: "c",
			state: map[string]string{"a": "met", "b": "closed", "c": "populating"},
		},
		{
			name: "cap serves the starved config first",
			cfgs: []Config{{Config: "a", Weight: 2, LastWork: recent}, {Config: "b", Weight: 1, LastWork: now.Add(-5 * time.Hour)}},
			tune: PopulatorTuning{MaxQueued: 2},
			want: map[string]int{"a": 1, "b": 1}, first: "b",
		},
		{
			name: "cap with one place: the boosted config takes it",
			cfgs: []Config{{Config: "a", Weight: 2, LastWork: recent}, {Config: "b", Weight: 1}},
			tune: PopulatorTuning{MaxQueued: 1},
			want: map[string]int{"b": 1}, first: "b",
		},
		{
			name: "velocity raises priority",
			cfgs: []Config{{Config: "a", LastWork: recent}, {Config: "b", Velocity: 20, LastWork: recent}},
			tune: PopulatorTuning{MaxQueued: 1},
			want: map[string]int{"b": 1}, first: "b",
		},
		{
			name: "queued items count against depth and cap",
			cfgs: []Config{{Config: "a", Queue: []string{Selfplay, Training}, LastWork: recent}, {Config: "b", Queue: []string{Selfplay}, LastWork: recent}},
			tune: PopulatorTuning{MaxQueued: 4},
			want: map[string]int{"a": 1}, first: "a",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plans, ds := Populate(tc.cfgs, now, tc.tune)
			got := map[string]int{}
			for _, d := range ds {
				got[d.Config]++
				if d.Why == "" {
					t.Fatalf("decision without why: %+v", d)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("queued %v, want %v", got, tc.want)
			}
			for c, n := range tc.want {
				if got[c] != n {
					t.Fatalf("queued %v, want %v", got, tc.want)
				}
			}
			if len(ds) > 0 && ds[0].Config != tc.first {
				t.Fatalf("first served %s, want %s (%+v)", ds[0].Config, tc.first, plans)
			}
			for _, p := range plans {
				if want, ok := tc.state[p.Config]; ok && p.State != want {
					t.Fatalf("%s: state %s (%s), want %s", p.Config, p.State, p.Why, want)
				}
			}
		})
	}
}

func TestPriorityWhy(t *testing.T) {
	now := time.Now()
	tu := PopulatorTuning{}.WithDefaults()
	p, why := Priority(Config{Weight: 1, LastWork: now.Add(-5 * time.Hour)}, now, tu)
	if p != 3 || !strings.Contains(why, "starved 5h0m0s") {
		t.Fatalf("starved: %v %q", p, why)
	}
	if p, _ := Priority(Config{Weight: 1, LastWork: now.Add(-time.Hour)}, now, tu); p != 1 {
		t.Fatalf("fresh: %v", p)
	}
}

func TestValidate(t *testing.T) {
	if err := (PopulatorTuning{}).WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (PopulatorTuning{Mix: Mix{Selfplay: 0.5, Training: 0.2}}).WithDefaults().Validate(); err == nil {
		t.Fatal("a mix summing to 0.7 passed")
	}
	if err := (PopulatorTuning{Mix: Mix{Training: 0.5, Tournament: 0.5}}).WithDefaults().Validate(); err == nil {
		t.Fatal("a mix without self-play passed")
	}
}
