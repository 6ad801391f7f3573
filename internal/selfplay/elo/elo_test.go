package elo

import (
	"math"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestExpected(t *testing.T) {
	for _, tc := range []struct{ ra, rb, want float64 }{
		{1500, 1500, 0.5},
		{1900, 1500, 1 / (1 + math.Pow(10, -1))}, // 400 points: 10:1 odds
		{1500, 1900, 1 / (1 + 10.0)},
		{1000, 1000, 0.5},
	} {
		if got := Expected(tc.ra, tc.rb); !near(got, tc.want) {
			t.Errorf("Expected(%v,%v) = %v, want %v", tc.ra, tc.rb, got, tc.want)
		}
	}
	if s := Expected(1600, 1400) + Expected(1400, 1600); !near(s, 1) {
		t.Errorf("expected scores sum to %v", s)
	}
}

func TestRecord(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		m            Match
		wantA, wantB float64
		wantGamesA   int
		wantWinsB    int
	}{
		// Two fresh models at 1500: 3 wins 1 loss → S = 0.75, E = 0.5, K·n·(S−E) = 32·4·0.25 = 32.
		{"even ratings", Match{Config: "c", A: "m1", B: "m2", Wins: 3, Losses: 1, At: at}, 1532, 1468, 4, 1},
		// The random baseline is anchored at 1000: E(1500 vs 1000) ≈ 0.9468; 10 wins → +32·10·0.0532.
		{"against the anchor", Match{Config: "c", A: "m1", B: Random, Wins: 10, At: at}, 1500 + 320*(1-Expected(1500, 1000)), 1000, 10, 0},
		// All draws between equals move nothing.
		{"draws", Match{Config: "c", A: "m1", B: "m2", Draws: 6, At: at}, 1500, 1500, 6, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := New(0)
			m, err := tb.Record(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			a, b := tb.Get("c", tc.m.A), tb.Get("c", tc.m.B)
			if !near(a.Elo, tc.wantA) || !near(b.Elo, tc.wantB) {
				t.Fatalf("ratings %.4f / %.4f, want %.4f / %.4f", a.Elo, b.Elo, tc.wantA, tc.wantB)
			}
			if a.Games != tc.wantGamesA || b.Wins != tc.wantWinsB || b.Losses != tc.m.Wins {
				t.Fatalf("counts a %+v b %+v", a, b)
			}
			if !near(m.DeltaA, tc.wantA-1500) || len(tb.History("c")) != 1 {
				t.Fatalf("recorded %+v, history %d", m, len(tb.History("c")))
			}
		})
	}
	tb := New(0)
	for _, bad := range []Match{{A: "x", B: "x", Wins: 1}, {A: "x", B: "y"}, {A: "x", B: "y", Wins: -1, Losses: 2}, {A: "", B: "y", Wins: 1}} {
		if _, err := tb.Record(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestPromoteAndLeaderboard(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tb := New(16)
	if _, err := tb.Record(Match{Config: "sq", A: "gen1", B: Random, Wins: 20, At: at}); err != nil {
		t.Fatal(err)
	}
	tb.Promote("sq", "gen1", at)
	// A new model starts at the best's rating.
	if g2 := tb.Get("sq", "gen2"); !near(g2.Elo, tb.Get("sq", "gen1").Elo) {
		t.Fatalf("gen2 starts at %v, best is %v", g2.Elo, tb.Get("sq", "gen1").Elo)
	}
	if _, err := tb.Record(Match{Config: "sq", A: "gen2", B: "gen1", Wins: 8, Losses: 2, At: at.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	tb.Promote("sq", "gen2", at.Add(time.Hour))
	lb := tb.Leaderboard("sq")
	if len(lb) != 3 || lb[0].Model != "gen2" || !lb[0].Best || lb[1].Best || lb[2].Model != Random || !lb[2].Anchor {
		t.Fatalf("leaderboard %+v", lb)
	}
	if tb.BestModel("sq") != "gen2" || tb.BestModel("other") != "" || len(tb.Leaderboard("other")) != 0 {
		t.Fatal("best model bookkeeping")
	}
}

func TestVelocity(t *testing.T) {
	now := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		name   string
		points []Point
		window time.Duration
		want   float64
	}{
		{"none", nil, 7 * day, 0},
		{"one point", []Point{{At: now, Elo: 1500}}, 7 * day, 0},
		{"10 a day", []Point{{At: now.Add(-2 * day), Elo: 1480}, {At: now.Add(-day), Elo: 1490}, {At: now, Elo: 1500}}, 7 * day, 10},
		{"old points outside the window", []Point{{At: now.Add(-30 * day), Elo: 0}, {At: now.Add(-day), Elo: 1500}, {At: now, Elo: 1505}}, 7 * day, 5},
		{"falling", []Point{{At: now.Add(-12 * time.Hour), Elo: 1500}, {At: now, Elo: 1490}}, day, -20},
		{"same moment", []Point{{At: now, Elo: 1500}, {At: now, Elo: 1600}}, day, 0},
	} {
		if got, _ := Velocity(tc.points, now, tc.window); !near(got, tc.want) {
			t.Errorf("%s: %v Elo/day, want %v", tc.name, got, tc.want)
		}
	}
	tb := New(0)
	tb.Promote("c", "m", now.Add(-day))
	tb.Get("c", "m").Elo = 1550
	tb.Promote("c", "m", now)
	if v, ok := tb.Velocity("c", now, 7*day); !ok || !near(v, 50) {
		t.Fatalf("table velocity %v (%v), want 50", v, ok)
	}

	// Minutes of history are not extrapolated to a day: a loop 20 minutes
	// old whose best rose 1,089 Elo read 482,061.7 Elo/day before.
	young := New(0)
	young.Promote("c", "a", now.Add(-20*time.Minute))
	young.Get("c", "a").Elo = 1893
	young.Promote("c", "a", now)
	if v, ok := young.Velocity("c", now, 7*day); ok || v != 0 {
		t.Errorf("velocity over 20 minutes: %v (%v), want too early", v, ok)
	}
	if raw, span := Velocity(young.Configs["c"].BestLog, now, 7*day); raw < 1e4 || span != 20*time.Minute {
		t.Errorf("raw slope %v over %v", raw, span)
	}
	young.Promote("c", "a", now.Add(MinVelocitySpan-20*time.Minute))
	if _, ok := young.Velocity("c", now.Add(MinVelocitySpan), 7*day); !ok {
		t.Error("an hour of history is enough")
	}
}
