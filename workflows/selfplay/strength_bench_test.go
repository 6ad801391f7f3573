package selfplay

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/trainyard/trainyard/internal/selfplay/elo"
	"github.com/trainyard/trainyard/internal/selfplay/quality"
)

// call runs one activity in the test environment.
func call[O any](tb testing.TB, ae *testsuite.TestActivityEnvironment, fn, in any) O {
	tb.Helper()
	v, err := ae.ExecuteActivity(fn, in)
	if err != nil {
		tb.Fatalf("%T: %v", in, err)
	}
	var out O
	if err := v.Get(&out); err != nil {
		tb.Fatal(err)
	}
	return out
}

// BenchmarkSelfplayStrength is the built-in learner's strength curve
// (issue 32; `make bench`): a square8_2p loop run generation by generation
// through the loop's own activities on this machine's CPUs (self-play by
// the heuristic, then by the best model; quality gate and export; training
// from the best on the last 3 exports; a gauntlet against the heuristic,
// random and the best; promotion at 0.55 against the best). Each
// generation is logged; reported: the best model's score against the
// heuristic after the last generation, and the generations and games it
// took.
func BenchmarkSelfplayStrength(b *testing.B) {
	const gens, games, sims, evalGames = 6, 200, 32, 40
	e := newEnv(b)
	var ts testsuite.WorkflowTestSuite
	ae := ts.NewTestActivityEnvironment()
	ae.RegisterActivity(e.agent)
	ae.RegisterActivity(e.ctl)
	set := Settings{GamesPerGeneration: games, Simulations: sims, EvalGames: evalGames, Quality: quality.Config{MinGames: games}}.WithDefaults()
	par := runtime.NumCPU()
	for _, search := range []string{SearchPUCT, SearchGumbel} {
		b.Run("search="+search, func(b *testing.B) { strengthCurve(b, e, ae, set, search, par) })
	}
}

// strengthCurve runs BenchmarkSelfplayStrength's loop with one root search
// in self-play and gauntlets.
func strengthCurve(b *testing.B, e *env, ae *testsuite.TestActivityEnvironment, set Settings, search string, par int) {
	const gens, games, sims, evalGames = 6, 200, 32, 40
	for i := range b.N {
		loop := fmt.Sprintf("selfplay/bench/square8_2p/strength-%s-%d", search, i)
		best, bestKey := "", ""
		var datasets []string
		var bestVsHeuristic float64
		began := time.Now()
		for n := 1; n <= gens; n++ {
			start := time.Now()
			play := PlayInput{LoopID: loop, Config: "square8_2p", GamePlugin: e.game, Generation: n, Attempt: 1, Games: games,
				ModelKey: bestKey, Simulations: sims, Search: search, Parallel: par, SyncInterval: 5 * time.Second, Seed: uint64(n)}
			if bestKey == "" {
				play.Players = "heuristic"
			}
			call[PlayProgress](b, ae, e.agent.SelfplayBatch, play)
			ex := call[ExportResult](b, ae, e.ctl.SelfplayExport, ExportInput{LoopID: loop, Config: "square8_2p", Generation: n, Settings: set})
			if !ex.Report.Passed {
				b.Fatalf("generation %d: quality gate: %s", n, ex.Report.Reason)
			}
			datasets = append(datasets, ex.Dataset)
			if len(datasets) > set.TrainWindow {
				datasets = datasets[1:]
			}
			tr := call[TrainResult](b, ae, e.agent.SelfplayTrain, TrainInput{LoopID: loop, Config: "square8_2p", GamePlugin: e.game, Generation: n,
				Model: ModelName(loop, n), Datasets: datasets, FromKey: bestKey, Epochs: set.TrainEpochs, Seed: uint64(n)})
			opps := []Opponent{{Name: elo.Heuristic}, {Name: elo.Random}}
			if best != "" {
				opps = append(opps, Opponent{Name: best, Key: bestKey})
			}
			ga := call[GauntletResult](b, ae, e.agent.SelfplayGauntlet, GauntletInput{LoopID: loop, Config: "square8_2p", GamePlugin: e.game, Generation: n,
				Candidate: Opponent{Name: tr.Model, Key: tr.Key}, Opponents: opps, Games: evalGames, Simulations: sims, Search: search, Parallel: par, Seed: uint64(n) + 7})
			score := map[string]float64{}
			for _, r := range ga.Results {
				score[r.Opponent] = r.Score
			}
			promote := (best == "" && score[elo.Random] >= set.PromoteScore) || (best != "" && score[best] >= set.PromoteScore)
			by := "heuristic"
			if best != "" {
				by = best
			}
			b.Logf("generation %d (%v): games by %s, %d positions, loss %.3f; %s vs heuristic %.2f, vs random %.2f, vs best %.2f; promoted %v",
				n, time.Since(start).Round(time.Second), by, ex.Positions, tr.Loss, tr.Model, score[elo.Heuristic], score[elo.Random], score[best], promote)
			if promote {
				best, bestKey, bestVsHeuristic = tr.Model, tr.Key, score[elo.Heuristic]
			}
		}
		b.ReportMetric(bestVsHeuristic, "best-vs-heuristic")
		b.ReportMetric(float64(gens*games), "games")
		b.ReportMetric(time.Since(began).Minutes(), "wall-minutes")
	}
}
