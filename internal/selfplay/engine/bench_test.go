package engine

import (
	"context"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/internal/selfplay/model"
)

// BenchmarkSelfPlay is issue 7's "self-play games per hour per core for
// square8_2p with heuristic and with MCTS (fixed simulations per move)":
// one goroutine plays whole games (one b.N iteration = one game, the same
// seeds every run) through the real kinrow-square8_2p WASM plugin, the
// way agents play them. MCTS searches either through the plugin
// (Save/Restore/Apply per simulation, "wasm") or on the native rules
// ("native", proven equal by the plugin's parity test); "rollouts" is
// MCTS before a model exists, "model" evaluates leaves with an untrained
// network of the size the tests train (192-64-66).
func BenchmarkSelfPlay(b *testing.B) {
	ctx := context.Background()
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: plugintest.CacheDir(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	mod, err := rt.Load(ctx, plugintest.BuildGo(b, "./plugins/kinrow/square8_2p"), pluginhost.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer mod.Close(ctx)
	games, err := mod.NewGames(ctx, 1, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer games.Close()
	meta := games.Metadata()
	net, err := model.New(model.Shape{ObsDim: meta.Observation.Dim(), Actions: meta.Action.N, Players: 2, Hidden: []int{64}}, 1)
	if err != nil {
		b.Fatal(err)
	}
	tests := []struct {
		name   string
		player Player
	}{
		{"random", Random{}},
		{"heuristic", Heuristic{}},
		{"mcts-rollouts/sims=64/wasm", &MCTS{Simulations: 64, DirichletAlpha: 0.3, TempMoves: 6}},
		{"mcts-rollouts/sims=64/native", &MCTS{Simulations: 64, DirichletAlpha: 0.3, TempMoves: 6, Native: true}},
		{"mcts-model/sims=32/wasm", &MCTS{Simulations: 32, Eval: net, DirichletAlpha: 0.3, TempMoves: 6}},
		{"mcts-model/sims=32/native", &MCTS{Simulations: 32, Eval: net, DirichletAlpha: 0.3, TempMoves: 6, Native: true}},
		{"mcts-model/sims=64/native", &MCTS{Simulations: 64, Eval: net, DirichletAlpha: 0.3, TempMoves: 6, Native: true}},
	}
	for _, tc := range tests {
		b.Run(tc.name, func(b *testing.B) {
			moves := 0
			start := time.Now()
			for i := 0; i < b.N; i++ {
				rec, err := PlayGame(ctx, games, 0, uint64(i), []Player{tc.player, tc.player}, 0)
				if err != nil {
					b.Fatal(err)
				}
				moves += len(rec.Moves)
			}
			el := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N)*3600/el, "games/h/core")
			b.ReportMetric(float64(moves)/float64(b.N), "moves/game")
		})
	}
}
