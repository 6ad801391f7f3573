package selfplay

import (
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/selfplay/elo"
	"github.com/trainyard/trainyard/internal/selfplay/quality"
)

// TestCatalogue: every config listed; a config's games summed over its
// loops, its best model the highest rated among them, its weight the one
// given; velocity never extrapolated from a rating history of minutes.
func TestCatalogue(t *testing.T) {
	now := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	table := func(best string, rating float64) *elo.Table {
		e := elo.New(0)
		e.Get("square8_2p", best).Elo = rating
		return e
	}
	loops := []OpsLoop{
		{ID: "a/square8_2p", Cluster: "a", Config: "square8_2p", State: State{TotalGames: 30, Best: "m-a", Elo: table("m-a", 1200)}},
		{ID: "b/square8_2p", Cluster: "b", Config: "square8_2p", State: State{TotalGames: 12, Best: "m-b", Elo: table("m-b", 1400)}},
	}
	cs := Catalogue(loops, map[string]float64{"square8_2p": 2}, now)
	if len(cs) < 10 {
		t.Fatalf("%d configs, want the whole catalogue", len(cs))
	}
	for _, c := range cs {
		if c.Config != "square8_2p" {
			if c.Weight != 1 || c.Games != 0 || c.Best != "" {
				t.Errorf("%s: %+v, want weight 1 and nothing played", c.Config, c)
			}
			continue
		}
		if c.Weight != 2 || c.Games != 42 || c.Best != "m-b" || c.Elo != 1400 || len(c.Loops) != 2 || c.MinVRAMMB != c.MinGB*1024 {
			t.Errorf("square8_2p: %+v", c)
		}
		if c.Velocity != 0 || !strings.HasPrefix(c.VelocityNote, "too early") {
			t.Errorf("square8_2p velocity %v (%q), want too early", c.Velocity, c.VelocityNote)
		}
	}
}

// TestDatasets: a loop's objects summed by generation, models left out,
// the state's games and quality verdict joined in, oldest first.
func TestDatasets(t *testing.T) {
	l := OpsLoop{ID: "a/square8_2p", Config: "square8_2p", State: State{Generations: []Generation{
		{N: 1, State: "promoted", Games: 24, Positions: 500, Quality: quality.Report{Score: 0.9, Passed: true}},
		{N: 2, State: "selfplay", Games: 7},
	}}}
	p := Prefix("loop-1")
	d := Datasets(l, "loop-1", []Object{
		{Key: p + "gen-000002/games/000001.json.gz", Size: 10},
		{Key: p + "gen-000001/games/000001.json.gz", Size: 100},
		{Key: p + "gen-000001/games/000002.json.gz", Size: 50},
		{Key: p + "gen-000001/dataset.npz", Size: 1000},
		{Key: p + "models/gen-000001.json", Size: 5},
	})
	if d.Prefix != p || d.Games != 31 || d.Batches != 3 || d.BatchBytes != 160 || d.Datasets != 1 || d.DataBytes != 1000 || len(d.Generations) != 2 {
		t.Fatalf("%+v", d)
	}
	g1, g2 := d.Generations[0], d.Generations[1]
	if g1.Generation != 1 || g1.Batches != 2 || g1.Dataset != p+"gen-000001/dataset.npz" || g1.Positions != 500 || !g1.Passed || g1.Quality != 0.9 {
		t.Errorf("generation 1: %+v", g1)
	}
	if g2.Generation != 2 || g2.Batches != 1 || g2.Dataset != "" || g2.State != "selfplay" {
		t.Errorf("generation 2: %+v", g2)
	}
}

// TestHealth: each daemon's last activity and last error from its state.
func TestHealth(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	sched := SchedulerState{Phase: "running", Slices: 2, History: []SliceRecord{{Config: "a", Ended: t0, Result: "completed"}, {Config: "b", Ended: t0.Add(time.Minute), Result: "failed: node lost"}}}
	if h := sched.Health(); h.LastActivity == nil || !h.LastActivity.Equal(t0.Add(time.Minute)) || h.LastError != "b: failed: node lost" || h.Detail != "running, 2 slices" {
		t.Errorf("scheduler: %+v", h)
	}
	idle := IdleState{Phase: "watching", Events: []IdleEvent{{At: t0, What: "loop ended: failed"}, {At: t0.Add(time.Second), What: "started loop"}}}
	if h := idle.Health(); !h.LastActivity.Equal(t0.Add(time.Second)) || h.LastError != "loop ended: failed" {
		t.Errorf("idle daemon: %+v", h)
	}
	if h := (&BatchInFlight{}).Health(); h.Detail != "batch started, no heartbeat yet" {
		t.Errorf("batch before its first beat: %+v", h)
	}
	if h := (&BatchInFlight{Progress: &PlayProgress{Synced: 3, Target: 9, Batches: 1}}).Health(); h.Detail != "3 of 9 games synced in 1 batches" {
		t.Errorf("batch: %+v", h)
	}
}
