package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/trainyard/trainyard/plugins"
	"github.com/trainyard/trainyard/plugins/plugintest"
)

// TestPlayGameWASM plays through the real kinrow plugins the way agents
// do, searching both through the sandbox and natively, and checks every
// record against a replay on the rules.
func TestPlayGameWASM(t *testing.T) {
	ctx := context.Background()
	rt, err := plugins.NewRuntime(ctx, plugins.RuntimeConfig{CacheDir: filepath.Join(plugintest.Root(t), ".cache", "wazero")})
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
			mod, err := rt.Load(ctx, plugintest.BuildGo(t, "./plugins/examples/kinrow/"+tc.config), plugins.LoadOptions{})
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
