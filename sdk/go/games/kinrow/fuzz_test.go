package kinrow

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// checkInvariants verifies what must hold after any sequence of legal
// moves: stone counts follow the turn order, the cells agree with the
// counts, terminal ⇔ (a line or a full board), the legal mask is the empty
// cells for the player to move only, and a save restores to the same game.
func checkInvariants(t *testing.T, g *Game, moves int, mask []bool, obs []float32) {
	t.Helper()
	cfg := g.Config()
	n := cfg.Players
	if g.Moves() != moves {
		t.Fatalf("Moves() = %d after %d moves", g.Moves(), moves)
	}
	var counts [MaxPlayers]int
	empty := 0
	lines := map[int]bool{}
	for c := 0; c < g.Geometry().Cells(); c++ {
		o := g.At(c)
		if o < 0 {
			empty++
			continue
		}
		counts[o]++
		if g.LongestRun(c, o) >= g.Geometry().K {
			lines[o] = true
		}
	}
	for p := 0; p < n; p++ {
		want := moves/n + btoi(p < moves%n)
		if counts[p] != want || g.Count(p) != want {
			t.Fatalf("player %d: %d stones on the board, Count %d, want %d after %d moves", p, counts[p], g.Count(p), want, moves)
		}
	}
	if len(lines) > 1 {
		t.Fatalf("several players have lines: %v", lines)
	}
	won := len(lines) == 1
	if won && !lines[g.Winner()] {
		t.Fatalf("lines %v, winner %d", lines, g.Winner())
	}
	if g.Terminal() != (won || empty == 0) {
		t.Fatalf("terminal=%v with a line=%v and %d empty cells", g.Terminal(), won, empty)
	}
	ret := make([]float32, n)
	if g.Outcome(ret) != g.Terminal() {
		t.Fatal("Outcome and Terminal disagree")
	}
	sum := float32(0)
	for _, r := range ret {
		sum += r
	}
	if want := map[bool]float32{true: float32(2 - n), false: 0}[won]; sum != want {
		t.Fatalf("returns %v sum to %v, want %v", ret, sum, want)
	}
	toMove := g.ToMove()
	if g.Terminal() != (toMove < 0) || (toMove >= 0 && toMove != moves%n) {
		t.Fatalf("to move %d after %d moves (terminal %v)", toMove, moves, g.Terminal())
	}
	for p := 0; p < n; p++ {
		g.Legal(p, mask)
		for c, ok := range mask {
			if ok != (p == toMove && g.At(c) < 0) {
				t.Fatalf("player %d cell %d: legal=%v, owner %d, to move %d", p, c, ok, g.At(c), toMove)
			}
		}
	}
	st := g.Save(nil)
	if len(st) != StateBytes(cfg) {
		t.Fatalf("state of %d bytes, StateBytes says %d", len(st), StateBytes(cfg))
	}
	h, err := FromState(st)
	if err != nil {
		t.Fatalf("restore a saved state: %v", err)
	}
	if !bytes.Equal(h.Save(nil), st) || h.Winner() != g.Winner() || h.ToMove() != toMove || h.Moves() != moves {
		t.Fatal("save/restore does not round-trip")
	}
	g.Observe(max(toMove, 0), obs)
	ones := 0
	for _, v := range obs {
		if v != 0 && v != 1 {
			t.Fatalf("observation value %v", v)
		}
		ones += int(v)
	}
	if ones != g.Geometry().Cells() {
		t.Fatalf("%d ones in the observation, want one per cell (%d)", ones, g.Geometry().Cells())
	}
}

// FuzzRandomPlay plays random legal games (with a few illegal attempts
// thrown in) on a fuzzer-chosen config and checks the invariants after
// every move.
func FuzzRandomPlay(f *testing.F) {
	for i := range Configs() {
		f.Add(uint64(i), uint8(i), uint8(0))
	}
	f.Add(uint64(99), uint8(1), uint8(200))
	f.Fuzz(func(t *testing.T, seed uint64, config, illegalEvery uint8) {
		cfgs := Configs()
		cfg := cfgs[int(config)%len(cfgs)]
		rng := rand.New(rand.NewPCG(seed, 1))
		g := MustNew(cfg)
		nc := g.Geometry().Cells()
		mask := make([]bool, nc)
		obs := make([]float32, ObsDim(cfg))
		moves := 0
		checkInvariants(t, g, moves, mask, obs)
		for !g.Terminal() {
			p := g.ToMove()
			if illegalEvery > 0 && moves%int(illegalEvery) == 0 {
				before := g.Save(nil)
				bad := []struct{ p, c int }{{(p + 1) % cfg.Players, rng.IntN(nc)}, {p, -1 - rng.IntN(3)}, {p, nc + rng.IntN(3)}}
				if moves > 0 {
					taken := rng.IntN(nc)
					for g.At(taken) < 0 {
						taken = (taken + 1) % nc
					}
					bad = append(bad, struct{ p, c int }{p, taken})
				}
				for _, b := range bad {
					if err := g.Apply(b.p, b.c); err == nil {
						t.Fatalf("illegal move player %d cell %d accepted", b.p, b.c)
					}
				}
				if !bytes.Equal(before, g.Save(nil)) {
					t.Fatal("a refused move changed the state")
				}
			}
			g.Legal(p, mask)
			c := rng.IntN(nc)
			for !mask[c] {
				c = (c + 1) % nc
			}
			if err := g.Apply(p, c); err != nil {
				t.Fatalf("legal move player %d cell %d: %v", p, c, err)
			}
			moves++
			checkInvariants(t, g, moves, mask, obs)
		}
		if g.Apply(0, 0) == nil {
			t.Fatal("a move after the end was accepted")
		}
	})
}
