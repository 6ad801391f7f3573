package selfplay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/trainyard/trainyard/internal/embedded"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/internal/selfplay/elo"
	"github.com/trainyard/trainyard/internal/selfplay/model"
	"github.com/trainyard/trainyard/internal/selfplay/npz"
	"github.com/trainyard/trainyard/internal/selfplay/quality"
)

// env is a real embedded S3, a real plugin runtime and the square8_2p
// game plugin in the plugin store.
type env struct {
	agent *AgentActivities
	ctl   *Activities
	game  string
	dir   string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	dir := t.TempDir()
	// Before the S3 gateway starts: it changes the working directory.
	wasm := plugintest.BuildGo(t, "./plugins/kinrow/square8_2p")
	cache := plugintest.CacheDir(t)
	creds, err := embedded.LoadOrCreateS3Credentials(filepath.Join(dir, "creds.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := embedded.StartS3("127.0.0.1", 0, filepath.Join(dir, "s3"), creds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := objstore.Open(ctx, objstore.Config{Endpoint: srv.Endpoint, Bucket: "selfplay-test", Insecure: true,
		AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	meta, err := rt.Validate(ctx, wasm, pluginhost.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ps := pluginstore.New(store)
	rec, err := ps.Put(ctx, wasm, meta, "test")
	if err != nil {
		t.Fatal(err)
	}
	agentDir := filepath.Join(dir, "agent")
	return &env{
		agent: &AgentActivities{Plugins: rt, PluginStore: ps, Store: store, Dir: agentDir, Node: "node-a"},
		ctl:   &Activities{Store: store},
		game:  rec.ID,
		dir:   agentDir,
	}
}

func (e *env) play(t *testing.T, in PlayInput) PlayProgress {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	ae := ts.NewTestActivityEnvironment()
	ae.RegisterActivity(e.agent)
	v, err := ae.ExecuteActivity(e.agent.SelfplayBatch, in)
	if err != nil {
		t.Fatalf("SelfplayBatch: %v", err)
	}
	var p PlayProgress
	if err := v.Get(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestActivities runs the agent and control activities on one real S3
// gateway (started once: it changes the process's working directory).
func TestActivities(t *testing.T) {
	e := newEnv(t)
	t.Run("batch syncs and resumes", func(t *testing.T) { testBatchSyncsAndResumes(t, e) })
	t.Run("gauntlet baselines", func(t *testing.T) { testGauntletBaselines(t, e) })
	t.Run("train and evaluate", func(t *testing.T) { testTrain(t, e) })
}

// testTrain trains a candidate on the export of the batch test, then a
// second from the first (the next generation), and plays the second
// against random with MCTS guided by it.
func testTrain(t *testing.T, e *env) {
	loop := "selfplay/lab/square8_2p/test0001"
	ds := DatasetKey(loop, 1)
	var ts testsuite.WorkflowTestSuite
	ae := ts.NewTestActivityEnvironment()
	ae.RegisterActivity(e.agent)
	train := func(gen int, from string) TrainResult {
		v, err := ae.ExecuteActivity(e.agent.SelfplayTrain, TrainInput{LoopID: loop, Config: "square8_2p", GamePlugin: e.game, Generation: gen,
			Model: ModelName(loop, gen), Datasets: []string{ds}, FromKey: from, Epochs: 2, Seed: 1})
		if err != nil {
			t.Fatalf("train generation %d: %v", gen, err)
		}
		var r TrainResult
		if err := v.Get(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	g1 := train(1, "")
	g2 := train(2, g1.Key)
	if g1.Model != "gen1-test0001" || g2.Key != ModelKey(loop, 2) || g2.Loss <= 0 {
		t.Fatalf("trained %+v then %+v", g1, g2)
	}
	raw, err := get(context.Background(), e.agent.Store, g2.Key)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Unmarshal(raw)
	if err != nil || m.Name != g2.Model {
		t.Fatalf("model in S3: %v, name %q", err, m.Name)
	}
	const games = 10
	v, err := ae.ExecuteActivity(e.agent.SelfplayGauntlet, GauntletInput{LoopID: loop, Config: "square8_2p", GamePlugin: e.game,
		Candidate: Opponent{Name: g2.Model, Key: g2.Key}, Opponents: []Opponent{{Name: elo.Random}}, Games: games, Simulations: 16, Parallel: 2, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	var res GauntletResult
	if err := v.Get(&res); err != nil {
		t.Fatal(err)
	}
	r := res.Results[0]
	t.Logf("%s (loss %.3f) vs random: %d-%d-%d", g2.Model, g2.Loss, r.Wins, r.Draws, r.Losses)
	if r.Wins+r.Draws+r.Losses != games {
		t.Fatalf("gauntlet counted %d games, played %d", r.Wins+r.Draws+r.Losses, games)
	}
}

// testBatchSyncsAndResumes: a batch uploads its games in sync batches and
// records them in its spool; a later attempt with a larger target plays
// only the missing indexes (what a retry after a lost node does), and the
// union is every index once.
func testBatchSyncsAndResumes(t *testing.T, e *env) {
	loop := "selfplay/lab/square8_2p/test0001"
	base := PlayInput{LoopID: loop, Config: "square8_2p", GamePlugin: e.game, Generation: 1, Simulations: 8,
		Parallel: 2, SyncInterval: 100 * time.Millisecond, Seed: 5}

	first := base
	first.Attempt, first.Games = 1, 6
	p1 := e.play(t, first)
	if p1.Resumed != 0 || p1.Played != 6 || p1.Synced != 6 || p1.Batches < 1 {
		t.Fatalf("first attempt: %+v", p1)
	}
	second := base
	second.Attempt, second.Games = 2, 14
	p2 := e.play(t, second)
	if p2.Resumed != 6 || p2.Played != 8 || p2.Synced != 14 {
		t.Fatalf("second attempt: %+v, want 6 resumed and 8 played", p2)
	}
	games, shape, err := ReadGames(context.Background(), e.agent.Store, loop, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(games) != 14 || fmt.Sprint(shape) != "[3 64]" {
		t.Fatalf("%d games in S3 (obs shape %v), want 14", len(games), shape)
	}
	for i, g := range games {
		if g.Index != i || !g.Game.Terminal || g.Game.Config != "square8_2p" || len(g.Game.Moves) == 0 || g.Game.Illegal != 0 {
			t.Fatalf("game %d: index %d, terminal %v, config %s, %d moves, %d illegal", i, g.Index, g.Game.Terminal, g.Game.Config, len(g.Game.Moves), g.Game.Illegal)
		}
	}
	// Spools: one line per finished game, the last sync's count.
	for _, tc := range []struct{ attempt, games, synced int }{{1, 6, 6}, {2, 8, 14}} {
		f, err := os.Open(SpoolPath(e.dir, loop, 1, tc.attempt))
		if err != nil {
			t.Fatal(err)
		}
		played, synced := 0, 0
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var l SpoolLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatal(err)
			}
			if l.Game != nil {
				played++
			} else {
				synced = l.Synced
			}
		}
		f.Close()
		if played != tc.games || synced != tc.synced {
			t.Fatalf("attempt %d spool: %d games, last sync %d; want %d, %d", tc.attempt, played, synced, tc.games, tc.synced)
		}
	}

	// The gate and export over the synced games.
	for _, tc := range []struct {
		name   string
		set    Settings
		passed bool
	}{
		{"passes", Settings{Quality: qualityCfg(14, 0.5)}, true},
		{"too few games", Settings{Quality: qualityCfg(100, 0.5)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ts testsuite.WorkflowTestSuite
			ae := ts.NewTestActivityEnvironment()
			ae.RegisterActivity(e.ctl)
			v, err := ae.ExecuteActivity(e.ctl.SelfplayExport, ExportInput{LoopID: loop, Config: "square8_2p", Generation: 1, Settings: tc.set.WithDefaults()})
			if err != nil {
				t.Fatal(err)
			}
			var res ExportResult
			if err := v.Get(&res); err != nil {
				t.Fatal(err)
			}
			if res.Report.Passed != tc.passed || res.Report.Games != 14 {
				t.Fatalf("report %+v", res.Report)
			}
			if !tc.passed {
				if res.Dataset != "" {
					t.Fatalf("a rejected batch was exported to %s", res.Dataset)
				}
				return
			}
			raw, err := get(context.Background(), e.agent.Store, res.Dataset)
			if err != nil {
				t.Fatal(err)
			}
			d, err := npz.Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			moves := 0
			for _, g := range games {
				moves += len(g.Game.Moves)
			}
			if d.Len() != moves || res.Positions != moves || d.Actions != 64 || fmt.Sprint(d.ObsShape) != "[3 64]" {
				t.Fatalf("export: %d positions (reported %d), %d actions, obs %v; want %d positions", d.Len(), res.Positions, d.Actions, d.ObsShape, moves)
			}
		})
	}
}

// testGauntletBaselines: the heuristic player against uniform-random
// play, seats alternating, wins clearly; every game is counted once.
func testGauntletBaselines(t *testing.T, e *env) {
	var ts testsuite.WorkflowTestSuite
	ae := ts.NewTestActivityEnvironment()
	ae.RegisterActivity(e.agent)
	const games = 20
	v, err := ae.ExecuteActivity(e.agent.SelfplayGauntlet, GauntletInput{LoopID: "selfplay/lab/square8_2p/g", Config: "square8_2p", GamePlugin: e.game,
		Candidate: Opponent{Name: elo.Heuristic}, Opponents: []Opponent{{Name: elo.Random}}, Games: games, Simulations: 8, Parallel: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var res GauntletResult
	if err := v.Get(&res); err != nil {
		t.Fatal(err)
	}
	r := res.Results[0]
	t.Logf("heuristic vs random: %d-%d-%d", r.Wins, r.Draws, r.Losses)
	if len(res.Results) != 1 || r.Wins+r.Draws+r.Losses != games || r.Score < 0.8 {
		t.Fatalf("heuristic vs random: %+v", res.Results)
	}
}

func qualityCfg(minGames int, threshold float64) quality.Config {
	return quality.Config{MinGames: minGames, Threshold: threshold}
}
