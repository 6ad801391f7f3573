package engine

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/plugintest"
)

// TestPlayGameWASM plays through the real kinrow plugins the way agents
// do, searching both through the sandbox and natively, and checks every
// record against a replay on the rules.
func TestPlayGameWASM(t *testing.T) {
	ctx := context.Background()
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: plugintest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	tests := []struct {
		config string
		player Player
		oneHot bool
	}{
		{"square8_2p", Heuristic{}, true},
		{"square8_2p", &MCTS{Simulations: 8, DirichletAlpha: 0.3, TempMoves: 4}, false},
		{"square8_2p", &MCTS{Simulations: 8, Native: true}, false},
		{"hex8_3p", &MCTS{Simulations: 4}, false},
		{"hex8_3p", Random{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.config+"/"+tc.player.Name(), func(t *testing.T) {
			mod, err := rt.Load(ctx, plugintest.BuildGo(t, "./plugins/kinrow/"+tc.config), pluginhost.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(ctx)
			games, err := mod.NewGames(ctx, 2, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer games.Close()
			rec, err := PlayGame(ctx, games, 1, 11, seats(tc.player, games.Metadata().NumPlayers), 0)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Config != tc.config || rec.Illegal != 0 || !rec.Terminal {
				t.Fatalf("record %s illegal %d terminal %v", rec.Config, rec.Illegal, rec.Terminal)
			}
			checkRecord(t, rec, tc.oneHot)
			t.Logf("%d moves, outcome %v", len(rec.Moves), rec.Outcome)
		})
	}
}

// TestHeuristicOtherGames: on a plugin that is not k-in-a-row the
// heuristic falls back to a one-ply win search through Save/Apply/Restore.
func TestHeuristicOtherGames(t *testing.T) {
	ctx := context.Background()
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: plugintest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	mod, err := rt.Load(ctx, plugintest.BuildGo(t, "./plugins/tictactoe"), pluginhost.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	games, err := mod.NewGames(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer games.Close()
	for i, a := range []int{0, 3, 1, 4} { // X: 0 1, O: 3 4; X to move wins at 2
		if err := games.Apply(0, i%2, a); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := games.Save(0, nil)
	legal := make([]bool, 9)
	if err := games.Legal(0, 0, legal); err != nil {
		t.Fatal(err)
	}
	pi := make([]float32, 9)
	for seed := uint64(0); seed < 5; seed++ {
		a, err := Heuristic{}.Move(ctx, Position{Games: games, Game: 0, Player: 0, Legal: legal}, rand.New(rand.NewPCG(seed, 0)), pi)
		if err != nil || a != 2 || pi[2] != 1 {
			t.Fatalf("heuristic played %d (%v), want the win at 2", a, err)
		}
	}
	after, _ := games.Save(0, nil)
	if string(before) != string(after) {
		t.Fatal("the heuristic left the game changed")
	}
	rec, err := PlayGame(ctx, games, 0, 1, []Player{Heuristic{}, Random{}}, 0)
	if err != nil || !rec.Terminal || rec.Config != "tictactoe" {
		t.Fatalf("tictactoe game: %+v %v", rec, err)
	}
}
