package pluginhost

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/trainyard/trainyard/internal/plugintest"
)

func newTicTacToe(t *testing.T, n int) *Games {
	t.Helper()
	rt := newTestRuntime(t)
	wasm := plugintest.BuildGo(t, "./plugins/tictactoe")
	meta, err := rt.Validate(context.Background(), wasm, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Kind != KindGame || meta.NumPlayers != 2 || meta.Action.N != 9 || meta.Observation.Dim() != 18 {
		t.Fatalf("metadata = %+v", meta)
	}
	g, err := load(t, rt, wasm, testLimits).NewGames(context.Background(), n, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func play(t *testing.T, g *Games, game int, moves ...int) {
	t.Helper()
	for i, a := range moves {
		if err := g.Apply(game, i%2, a); err != nil {
			t.Fatalf("move %d (%d): %v", i, a, err)
		}
	}
}

func TestGameABI(t *testing.T) {
	g := newTicTacToe(t, 3)
	ret := make([]float32, 2)
	// Game 0: X wins on the top row; game 1 untouched; game 2: draw.
	play(t, g, 0, 0, 3, 1, 4, 2)
	play(t, g, 2, 0, 1, 2, 4, 3, 5, 7, 6, 8)
	tests := []struct {
		game     int
		terminal bool
		ret      []float32
		toMove   []int
	}{
		{0, true, []float32{1, -1}, nil},
		{1, false, []float32{0, 0}, []int{0}},
		{2, true, []float32{0, 0}, nil},
	}
	for _, tc := range tests {
		over, err := g.Outcome(tc.game, ret)
		if err != nil || over != tc.terminal || !slices.Equal(ret, tc.ret) {
			t.Errorf("game %d: outcome = %v %v %v, want %v %v", tc.game, over, ret, err, tc.terminal, tc.ret)
		}
		p, err := g.ToMove(tc.game, nil)
		if err != nil || !slices.Equal(p, tc.toMove) {
			t.Errorf("game %d: to move = %v %v, want %v", tc.game, p, err, tc.toMove)
		}
	}
	// Illegal moves are ErrBadInput and leave the instance usable.
	for _, mv := range [][2]int{{1, 4}, {0, 9}} { // wrong player; cell out of range
		if err := g.Apply(1, mv[0], mv[1]); !errors.Is(err, ErrBadInput) {
			t.Errorf("apply %v: %v, want ErrBadInput", mv, err)
		}
	}
	play(t, g, 1, 4)
	if err := g.Apply(1, 1, 4); !errors.Is(err, ErrBadInput) {
		t.Errorf("apply on a taken cell: %v, want ErrBadInput", err)
	}
	// Observations are per player: own stones first.
	obs := make([]float32, 18)
	if err := g.Observe(1, 1, obs); err != nil || obs[9+4] != 1 || obs[4] != 0 {
		t.Errorf("player 1 observation %v %v, want the centre as the opponent's", obs, err)
	}
	mask := make([]bool, 9)
	if err := g.Legal(1, 1, mask); err != nil || mask[4] || !mask[0] {
		t.Errorf("legal mask %v %v", mask, err)
	}
	// Restore rejects garbage and accepts a saved state.
	if err := g.Restore(1, []byte{9, 9}); !errors.Is(err, ErrBadInput) {
		t.Errorf("restore garbage: %v, want ErrBadInput", err)
	}
	if err := g.Reset(1, 5); err != nil {
		t.Fatal(err)
	}
	if p, _ := g.ToMove(1, nil); !slices.Equal(p, []int{0}) {
		t.Errorf("after reset to move = %v", p)
	}
}

// negamax searches with save/restore, as MCTS or alpha-beta would, and
// returns the value for the player to move.
func negamax(t *testing.T, g *Games, nodes *int) float32 {
	*nodes++
	ret := make([]float32, 2)
	over, err := g.Outcome(0, ret)
	if err != nil {
		t.Fatal(err)
	}
	players, err := g.ToMove(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if over {
		return 0 // the caller scores terminal states from its own view
	}
	p := players[0]
	state, err := g.Save(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	mask := make([]bool, 9)
	if err := g.Legal(0, p, mask); err != nil {
		t.Fatal(err)
	}
	best := float32(-2)
	for a, ok := range mask {
		if !ok {
			continue
		}
		if err := g.Apply(0, p, a); err != nil {
			t.Fatal(err)
		}
		var v float32
		if over, _ := g.Outcome(0, ret); over {
			v = ret[p]
		} else {
			v = -negamax(t, g, nodes)
		}
		best = max(best, v)
		if err := g.Restore(0, state); err != nil {
			t.Fatal(err)
		}
	}
	return best
}

func TestGameTreeSearch(t *testing.T) {
	tests := []struct {
		name   string
		opened []int
		want   float32 // value for X (to move)
	}{
		{"centre then corner is a draw", []int{4, 0}, 0},
		{"centre then edge is a win for X", []int{4, 1}, 1},
		{"X completes a row", []int{0, 3, 1, 4}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newTicTacToe(t, 1)
			play(t, g, 0, tc.opened...)
			nodes := 0
			if v := negamax(t, g, &nodes); v != tc.want {
				t.Fatalf("value = %v, want %v (%d nodes)", v, tc.want, nodes)
			}
		})
	}
}
