package kinrow

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestGeometry(t *testing.T) {
	tests := []struct {
		family string
		cells  int
		axes   int
		k      int
	}{
		{Hex8, 61, 3, 5},
		{Square8, 64, 4, 5},
		{Square19, 361, 4, 5},
		{Hexagonal, 469, 3, 5},
	}
	for _, tc := range tests {
		t.Run(tc.family, func(t *testing.T) {
			g, err := GeometryOf(tc.family)
			if err != nil {
				t.Fatal(err)
			}
			if g.Cells() != tc.cells || len(g.Axes) != tc.axes || g.K != tc.k {
				t.Fatalf("cells %d axes %d k %d, want %d %d %d", g.Cells(), len(g.Axes), g.K, tc.cells, tc.axes, tc.k)
			}
			links := 0
			for c, xy := range g.Coords {
				if got := g.Cell(xy[0], xy[1]); got != c {
					t.Fatalf("cell %d at %v maps back to %d", c, xy, got)
				}
				for a := range g.Axes {
					if n := g.Neighbor(c, a, true); n >= 0 {
						links++
						if g.Neighbor(n, a, false) != c {
							t.Fatalf("neighbour of %d along axis %d does not point back", c, a)
						}
					}
				}
			}
			// Interior cells have 2·axes neighbours; count edges as a check
			// against closed forms: square n(n-1) per axis (×2 for the
			// straight axes, (n-1)² per diagonal), hex 3 axes × s-1 rows...
			want := 0
			if g.Hex {
				s := g.Size
				want = 3 * (3*s*s - 3*s + 1 - (2*s - 1)) // each axis: cells minus one per line
			} else {
				n := g.Size
				want = 2*n*(n-1) + 2*(n-1)*(n-1)
			}
			if links != want {
				t.Errorf("%d neighbour links, want %d", links, want)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name string
		want Config
		ok   bool
	}{
		{"square8_2p", Config{Square8, 2}, true},
		{"hexagonal_4p", Config{Hexagonal, 4}, true},
		{"hex8_3p", Config{Hex8, 3}, true},
		{"square19_3p", Config{Square19, 3}, true},
		{"square8_5p", Config{}, false},
		{"square8_1p", Config{}, false},
		{"go19_2p", Config{}, false},
		{"square8", Config{}, false},
		{"square8_xp", Config{}, false},
	}
	for _, tc := range tests {
		got, err := ParseConfig(tc.name)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseConfig(%q) = %v, %v; want %v ok=%v", tc.name, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.name {
			t.Errorf("String() = %q, want %q", got.String(), tc.name)
		}
	}
	if n := len(Configs()); n != 12 {
		t.Errorf("%d configs, want 12", n)
	}
}

// line returns K cells in a row along axis a, as far from the board's
// first cells as possible so filler moves (taken from the start) miss it.
func line(g *Geometry, a int) []int {
	for c := g.Cells() - 1; c >= 0; c-- {
		cells := []int{c}
		for len(cells) < g.K {
			n := g.Neighbor(cells[len(cells)-1], a, true)
			if n < 0 {
				break
			}
			cells = append(cells, n)
		}
		if len(cells) == g.K {
			return cells
		}
	}
	return nil
}

func mustApply(t *testing.T, g *Game, p, c int) {
	t.Helper()
	if err := g.Apply(p, c); err != nil {
		t.Fatalf("apply player %d cell %d: %v", p, c, err)
	}
}

func TestLegalMoves(t *testing.T) {
	for _, cfg := range Configs() {
		t.Run(cfg.String(), func(t *testing.T) {
			g := MustNew(cfg)
			n := g.Geometry().Cells()
			mask := make([]bool, n)
			for p := 0; p < cfg.Players; p++ {
				g.Legal(p, mask)
				want := p == 0
				for c, ok := range mask {
					if ok != want {
						t.Fatalf("empty board: player %d cell %d legal=%v, want %v", p, c, ok, want)
					}
				}
			}
			mustApply(t, g, 0, 0)
			g.Legal(1, mask)
			if mask[0] || !mask[1] || g.ToMove() != 1 {
				t.Fatalf("after one stone: mask[0]=%v mask[1]=%v to move %d", mask[0], mask[1], g.ToMove())
			}
			for _, bad := range []struct{ p, c int }{{1, 0}, {0, 1}, {2 % cfg.Players, 1}, {1, -1}, {1, n}} {
				if bad.p == 1 && bad.c == 1 {
					continue
				}
				before := g.Save(nil)
				if err := g.Apply(bad.p, bad.c); err == nil {
					t.Errorf("apply player %d cell %d: accepted", bad.p, bad.c)
				}
				if !bytes.Equal(before, g.Save(nil)) {
					t.Errorf("a refused move changed the state")
				}
			}
		})
	}
}

func TestWins(t *testing.T) {
	for _, cfg := range Configs() {
		geo, _ := GeometryOf(cfg.Board)
		for a := range geo.Axes {
			for _, winner := range []int{0, cfg.Players - 1} {
				t.Run(fmt.Sprintf("%s/axis%d/player%d", cfg, a, winner), func(t *testing.T) {
					g := MustNew(cfg)
					ln := line(geo, a)
					if ln == nil {
						t.Fatalf("no line of %d along axis %d", geo.K, a)
					}
					filler := 0
					for placed := 0; placed < geo.K; {
						p := g.ToMove()
						if p < 0 {
							t.Fatalf("game over after %d of the winner's stones", placed)
						}
						if p == winner {
							mustApply(t, g, p, ln[placed])
							placed++
							continue
						}
						// Fillers avoid the line and never complete one.
						for slices.Contains(ln, filler) || g.At(filler) >= 0 || g.LongestRun(filler, p) >= geo.K-1 {
							filler++
						}
						mustApply(t, g, p, filler)
					}
					ret := make([]float32, cfg.Players)
					if !g.Outcome(ret) || g.Winner() != winner || g.ToMove() != -1 {
						t.Fatalf("after the line: terminal=%v winner=%d to move=%d", g.Terminal(), g.Winner(), g.ToMove())
					}
					for p, r := range ret {
						want := float32(-1)
						if p == winner {
							want = 1
						}
						if r != want {
							t.Fatalf("returns %v, want +1 for player %d and -1 for the rest", ret, winner)
						}
					}
					mask := make([]bool, geo.Cells())
					for p := 0; p < cfg.Players; p++ {
						g.Legal(p, mask)
						if slices.Contains(mask, true) {
							t.Fatalf("player %d has legal moves after the win", p)
						}
						if err := g.Apply(p, filler+1); err == nil {
							t.Fatalf("player %d moved after the win", p)
						}
					}
					// A line of K-1 is not a win: take the last stone back.
					st := g.Save(nil)
					st[stateHeader+ln[geo.K-1]] = 0
					// Keep the counts legal: drop the last filler stone too
					// when the winner did not move last... the winner did.
					h, err := FromState(st)
					if err != nil {
						t.Fatalf("restore without the last stone: %v", err)
					}
					if h.Terminal() || h.ToMove() != winner {
						t.Fatalf("K-1 in a row: terminal=%v to move %d, want player %d to move", h.Terminal(), h.ToMove(), winner)
					}
				})
			}
		}
	}
}

// drawGame plays a full board without a line. Two-player square boards
// use a pattern (pairs of cells alternating along rows, shifted by one each
// row: no run longer than 2 on any axis); otherwise every move takes a cell
// where the mover's longest run stays shortest, ties at random. It returns
// nil when no seed below 200 finds one.
func drawGame(cfg Config) (*Game, []int) {
	if g := MustNew(cfg); !g.geo.Hex && cfg.Players == 2 {
		var own [2][]int
		for c, xy := range g.geo.Coords {
			col := (xy[0]/2 + xy[1]) % 2
			own[col] = append(own[col], c)
		}
		if len(own[0]) < len(own[1]) {
			own[0], own[1] = own[1], own[0]
		}
		var moves []int
		for i := 0; i < len(own[0]); i++ {
			moves = append(moves, own[0][i])
			if i < len(own[1]) {
				moves = append(moves, own[1][i])
			}
		}
		for i, c := range moves {
			if err := g.Apply(i%2, c); err != nil {
				panic(err)
			}
		}
		return g, moves
	}
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		g := MustNew(cfg)
		var moves []int
		for !g.Terminal() {
			p := g.ToMove()
			best, pick, seen := 1<<30, -1, 0
			for c := 0; c < g.Geometry().Cells(); c++ {
				if g.At(c) >= 0 {
					continue
				}
				l := g.LongestRun(c, p)
				// Prefer cells that also cut the next player's long runs.
				l = 2*l - min(g.LongestRun(c, (p+1)%cfg.Players), g.geo.K-1)
				switch {
				case l < best:
					best, pick, seen = l, c, 1
				case l == best:
					seen++
					if rng.IntN(seen) == 0 {
						pick = c
					}
				}
			}
			moves = append(moves, pick)
			if err := g.Apply(p, pick); err != nil {
				panic(err)
			}
		}
		if g.Winner() < 0 {
			return g, moves
		}
	}
	return nil, nil
}

func TestDraws(t *testing.T) {
	for _, cfg := range Configs() {
		t.Run(cfg.String(), func(t *testing.T) {
			g, moves := drawGame(cfg)
			if g == nil {
				t.Fatal("no drawn game found")
			}
			ret := []float32{9, 9, 9, 9}[:cfg.Players]
			if !g.Outcome(ret) || !g.Full() || g.Winner() != -1 || g.ToMove() != -1 {
				t.Fatalf("full board: terminal=%v full=%v winner=%d", g.Terminal(), g.Full(), g.Winner())
			}
			if slices.ContainsFunc(ret, func(r float32) bool { return r != 0 }) {
				t.Fatalf("draw returns %v, want zeros", ret)
			}
			if len(moves) != g.Geometry().Cells() {
				t.Fatalf("%d moves, want %d", len(moves), g.Geometry().Cells())
			}
			// Before the last move the game was on and the last mover had
			// exactly one legal move.
			st := g.Save(nil)
			st[stateHeader+moves[len(moves)-1]] = 0
			h, err := FromState(st)
			if err != nil {
				t.Fatal(err)
			}
			mask := make([]bool, g.Geometry().Cells())
			h.Legal(h.ToMove(), mask)
			if h.Terminal() || slices.Index(mask, true) != moves[len(moves)-1] || slices.Contains(mask[moves[len(moves)-1]+1:], true) {
				t.Fatalf("one empty cell: terminal=%v", h.Terminal())
			}
		})
	}
}

func TestObserve(t *testing.T) {
	g := MustNew(Config{Square8, 3})
	mustApply(t, g, 0, 10)
	mustApply(t, g, 1, 20)
	mustApply(t, g, 2, 30)
	obs := make([]float32, ObsDim(g.Config()))
	g.Observe(1, obs)
	// Player 1's view: own (20), then player 2 (30), then player 0 (10), then empty.
	for _, tc := range []struct{ plane, cell int }{{0, 20}, {1, 30}, {2, 10}, {3, 0}} {
		if obs[tc.plane*64+tc.cell] != 1 {
			t.Errorf("plane %d cell %d = %v, want 1", tc.plane, tc.cell, obs[tc.plane*64+tc.cell])
		}
	}
	sum := float32(0)
	for _, v := range obs {
		sum += v
	}
	if sum != 64 {
		t.Errorf("observation sums to %v, want 64 (one plane set per cell)", sum)
	}
}

func TestRestoreRejects(t *testing.T) {
	g := MustNew(Config{Square8, 2})
	good := g.Save(nil)
	tests := []struct {
		name  string
		state func() []byte
	}{
		{"empty", func() []byte { return nil }},
		{"version", func() []byte { s := slices.Clone(good); s[0] = 9; return s }},
		{"other config", func() []byte { return MustNew(Config{Square8, 3}).Save(nil) }},
		{"short", func() []byte { return good[:10] }},
		{"cell value", func() []byte { s := slices.Clone(good); s[5] = 3; return s }},
		{"turn order", func() []byte { s := slices.Clone(good); s[5] = 2; return s }},
		{"line by the wrong player", func() []byte {
			s := slices.Clone(good)
			for i := 0; i < 5; i++ {
				s[stateHeader+i] = 1      // player 0: cells 0-4 in a row
				s[stateHeader+16+2*i] = 2 // player 1: scattered
			}
			return s
		}},
	}
	for _, tc := range tests {
		if err := g.Restore(tc.state()); err == nil {
			t.Errorf("%s: restored", tc.name)
		}
	}
}
