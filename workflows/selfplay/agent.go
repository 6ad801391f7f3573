package selfplay

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/agent/drain"
	"github.com/trainyard/trainyard/internal/agent/procenv"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/internal/selfplay"
	"github.com/trainyard/trainyard/internal/selfplay/elo"
	"github.com/trainyard/trainyard/internal/selfplay/engine"
	"github.com/trainyard/trainyard/sdk/go/games/kinrow"
)

// AgentActivities run on a node's agent: self-play batches, training and
// gauntlets.
type AgentActivities struct {
	Plugins     *pluginhost.Runtime
	PluginStore *pluginstore.Store
	Store       *objstore.Store
	// Dir holds the local spool of finished games
	// (selfplay/<cluster>/<config>/gen-N/aNN.spool): one line per game as
	// it finishes and one per sync, so what a killed agent had played and
	// what it had synced can be counted afterwards.
	Dir string
	// Node names the agent in batch objects.
	Node string
	// Drain is the agent's drain switch: once thrown (an operator's drain,
	// a preemption notice, SIGTERM) a self-play batch stops its games in
	// flight, syncs every finished game and returns ErrDrained, so the
	// loop moves with no finished game lost. Nil never drains.
	Drain *drain.Signal
	// User runs the loop's model commands (usermodel.go) as the agent's
	// job user (nil: the agent's own).
	User *procenv.User
}

// SpoolPath is an attempt's spool file under the agent's dir.
func SpoolPath(dir, loopID string, gen, attempt int) string {
	return filepath.Join(dir, filepath.FromSlash(genPrefix(loopID, gen)), fmt.Sprintf("a%02d.spool", attempt))
}

// SpoolLine is one line of a spool: a finished game (Game ≥ 0) or a
// completed sync (Synced: the generation's games in S3 after it).
type SpoolLine struct {
	Game   *int  `json:"game,omitempty"`
	Sync   int   `json:"sync,omitempty"`
	Synced int   `json:"synced,omitempty"`
	At     int64 `json:"at"` // unix ms
}

func (a *AgentActivities) module(ctx context.Context, sha string) (*pluginhost.Module, error) {
	wasm, err := a.PluginStore.Module(ctx, sha)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("game plugin %.12s: %v", sha, err), ErrFailed, err)
	}
	m, err := a.Plugins.Load(ctx, wasm, pluginhost.LoadOptions{})
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("game plugin %.12s: %v", sha, err), ErrFailed, err)
	}
	if m.Metadata().Kind != pluginhost.KindGame {
		m.Close(ctx)
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("plugin %s is a %s plugin, not a game", m.Metadata().Label(), m.Metadata().Kind), ErrFailed, nil)
	}
	return m, nil
}

// SelfplayBatch plays the generation's self-play games that are not in S3 yet
// (a retry continues where the lost attempt's last sync left off), with
// in.Parallel games at once, and uploads finished games every
// SyncInterval — even a single one — so a node that vanishes loses at
// most one interval of games. It heartbeats its progress.
func (a *AgentActivities) SelfplayBatch(ctx context.Context, in PlayInput) (PlayProgress, error) {
	activity.RecordHeartbeat(ctx)
	prog := PlayProgress{Target: in.Games}
	done, _, err := ReadGames(ctx, a.Store, in.LoopID, in.Generation)
	if err != nil {
		return prog, err
	}
	have := map[int]bool{}
	for _, g := range done {
		have[g.Index] = true
	}
	prog.Resumed, prog.Synced = len(have), len(have)
	var todo []int
	for i := 0; i < in.Games; i++ {
		if !have[i] {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return prog, nil
	}
	mod, err := a.module(ctx, in.GamePlugin)
	if err != nil {
		return prog, err
	}
	defer mod.Close(context.WithoutCancel(ctx))
	meta := mod.Metadata()
	self := Opponent{Name: "self", Key: in.ModelKey}
	if in.ModelKey == "" && in.Players == "heuristic" {
		self.Name = elo.Heuristic
	}
	pc := &playCtx{meta: meta, loopID: in.LoopID, model: in.Model, gpus: in.GPUs, sims: in.Simulations, gumbel: in.Search == SearchGumbel}
	defer pc.close()
	seat, err := a.player(ctx, pc, self, true)
	if err != nil {
		return prog, err
	}

	spoolPath := SpoolPath(a.Dir, in.LoopID, in.Generation, in.Attempt)
	if err := os.MkdirAll(filepath.Dir(spoolPath), 0o755); err != nil {
		return prog, fmt.Errorf("spool dir: %w", err)
	}
	spool, err := os.OpenFile(spoolPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return prog, fmt.Errorf("spool: %w", err)
	}
	defer spool.Close()
	var spoolMu sync.Mutex
	writeSpool := func(l SpoolLine) {
		l.At = time.Now().UnixMilli()
		b, _ := json.Marshal(l)
		spoolMu.Lock()
		defer spoolMu.Unlock()
		_, _ = spool.Write(append(b, '\n'))
	}

	// Workers play; this goroutine collects and syncs.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	results := make(chan Numbered)
	errs := make(chan error, in.Parallel)
	// abandon is closed when the collector stops collecting; until then a
	// worker always hands its finished (spooled) game over, even once
	// cancelled.
	abandon := make(chan struct{})
	defer close(abandon)
	var wg sync.WaitGroup
	for w := 0; w < min(in.Parallel, len(todo)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			games, err := mod.NewGames(pctx, 1, in.Seed)
			if err != nil {
				errs <- fmt.Errorf("new games: %w", err)
				return
			}
			defer games.Close()
			seats := make([]engine.Player, meta.NumPlayers)
			for i := range seats {
				seats[i] = seat
			}
			defer join(seat)()
			for i := range jobs {
				g, err := engine.PlayGame(pctx, games, 0, in.Seed+uint64(i), seats, in.MaxMoves)
				if err != nil {
					errs <- fmt.Errorf("game %d: %w", i, pc.explain(err))
					return
				}
				// Spooled as it finishes, before the collector (busy
				// uploading, perhaps) takes it.
				writeSpool(SpoolLine{Game: &i})
				select {
				case results <- Numbered{Index: i, Game: g}:
				case <-abandon:
					return
				}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for _, i := range todo {
			select {
			case jobs <- i:
			case <-pctx.Done():
				return
			}
		}
	}()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	var pending []Numbered
	// rest stops the games in flight and collects every game that
	// finished (and was spooled) before that, so the sync after it
	// uploads all of them: a finished game is never dropped on the way
	// from a worker to the collector.
	rest := func() {
		cancel()
		for {
			select {
			case g := <-results:
				pending = append(pending, g)
				prog.Played++
			case <-finished:
				return
			}
		}
	}
	seq := 0
	flush := func(ctx context.Context) error {
		if len(pending) == 0 {
			return nil
		}
		seq++
		b := Batch{Generation: in.Generation, Attempt: in.Attempt, Seq: seq, Node: a.Node, ObsShape: meta.Observation.Shape, Games: pending}
		if err := putBatch(ctx, a.Store, batchKey(in.LoopID, in.Generation, in.Attempt, seq), b); err != nil {
			return err
		}
		prog.Synced += len(pending)
		prog.Batches++
		pending = nil
		writeSpool(SpoolLine{Sync: seq, Synced: prog.Synced})
		activity.RecordHeartbeat(ctx, prog)
		return nil
	}
	tick := time.NewTicker(in.SyncInterval)
	defer tick.Stop()
	beat := time.NewTicker(2 * time.Second)
	defer beat.Stop()
	drained := a.Drain.Done()
	for {
		select {
		case g := <-results:
			pending = append(pending, g)
			prog.Played++
		case <-tick.C:
			if err := flush(ctx); err != nil {
				return prog, err
			}
		case <-beat.C:
			prog.EvalBatch = pc.meanBatch()
			activity.RecordHeartbeat(ctx, prog)
		case err := <-errs:
			// Keep what finished: a retry need not play it again.
			rest()
			_ = flush(context.WithoutCancel(ctx))
			return prog, fmt.Errorf("self-play %s generation %d: %w", in.Config, in.Generation, err)
		case <-finished:
			// Results sent before the workers ended are in the channel
			// no longer: every send completed before wg.Done.
			if err := flush(ctx); err != nil {
				return prog, err
			}
			prog.EvalBatch = pc.meanBatch()
			return prog, nil
		case <-drained:
			// The node drains: sync everything finished, then move.
			rest()
			if err := flush(context.WithoutCancel(ctx)); err != nil {
				return prog, err
			}
			return prog, temporal.NewApplicationErrorWithOptions(
				fmt.Sprintf("node %s drains (%s): %d games synced, %d this attempt", a.Node, a.Drain.Reason(), prog.Synced, prog.Played),
				ErrDrained, temporal.ApplicationErrorOptions{Details: []any{prog}})
		case <-ctx.Done():
			// Cancelled (or the worker stopping): a last sync of every
			// game that finished.
			rest()
			_ = flush(context.WithoutCancel(ctx))
			return prog, ctx.Err()
		}
	}
}

// player builds the engine player for an opponent: the baselines by name,
// else MCTS guided by the model at Key (random rollouts without one).
// Self-play explores (root noise, early moves sampled); evaluation plays
// its best moves after two sampled ones.
func (a *AgentActivities) player(ctx context.Context, pc *playCtx, o Opponent, explore bool) (engine.Player, error) {
	switch o.Name {
	case elo.Random:
		return engine.Random{}, nil
	case elo.Heuristic:
		return engine.Heuristic{}, nil
	}
	meta := pc.meta
	m := &engine.MCTS{Simulations: pc.sims, Gumbel: pc.gumbel, Native: isKinrow(meta)}
	if explore {
		m.DirichletAlpha, m.TempMoves = 0.3, max(2, meta.Action.N/10)
	} else {
		// Evaluation samples only its first two moves: without that, two
		// deterministic searches replay the same two games over and over.
		m.TempMoves = 2
	}
	switch {
	case o.Key == "":
		return m, nil
	case isModelDir(o.Key):
		if pc.model == nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("model %s is a model directory, and the loop has no model.evaluator to serve it", o.Key), ErrFailed, nil)
		}
		s, err := a.serve(ctx, pc, o)
		if err != nil {
			return nil, err
		}
		pc.servers = append(pc.servers, s)
		m.Eval, m.Model = s.Batcher, s.name
		return modelPlayer{MCTS: m, s: s}, nil
	}
	ev, name, err := a.evaluator(ctx, o.Key)
	if err != nil {
		return nil, err
	}
	m.Eval, m.Model = ev, name
	return m, nil
}

func isKinrow(meta pluginhost.Metadata) bool {
	if !strings.HasPrefix(meta.Name, "kinrow-") {
		return false
	}
	_, err := kinrow.ParseConfig(engine.ConfigOf(meta))
	return err == nil
}

// SelfplayGauntlet plays the candidate against each opponent, Games games each
// with the seats rotating, and counts the candidate's wins, draws and
// losses (a win: its outcome above every opponent seat's).
func (a *AgentActivities) SelfplayGauntlet(ctx context.Context, in GauntletInput) (GauntletResult, error) {
	activity.RecordHeartbeat(ctx)
	mod, err := a.module(ctx, in.GamePlugin)
	if err != nil {
		return GauntletResult{}, err
	}
	defer mod.Close(context.WithoutCancel(ctx))
	meta := mod.Metadata()
	pc := &playCtx{meta: meta, loopID: in.LoopID, model: in.Model, gpus: in.GPUs, sims: in.Simulations, gumbel: in.Search == SearchGumbel}
	defer pc.close()
	cand, err := a.player(ctx, pc, in.Candidate, false)
	if err != nil {
		return GauntletResult{}, err
	}
	out := GauntletResult{Results: []GauntletScore{}}
	// A game against a model on a slow evaluator may outlast the heartbeat
	// timeout: beat on a clock, not only per game.
	var current atomic.Int64
	bctx, stopBeat := context.WithCancel(ctx)
	defer stopBeat()
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-bctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, int(current.Load()))
			}
		}
	}()
	for oi, o := range in.Opponents {
		current.Store(int64(oi))
		opp, err := a.player(ctx, pc, o, false)
		if err != nil {
			return out, err
		}
		r := GauntletScore{Opponent: o.Name}
		var mu sync.Mutex
		err = parallel(ctx, in.Games, in.Parallel, func(ctx context.Context, games *pluginhost.Games, i int) error {
			seats := make([]engine.Player, meta.NumPlayers)
			me := i % meta.NumPlayers
			for s := range seats {
				seats[s] = opp
			}
			seats[me] = cand
			defer join(cand, opp)()
			g, err := engine.PlayGame(ctx, games, 0, in.Seed+uint64(oi)*100_003+uint64(i), seats, in.MaxMoves)
			if err != nil {
				return pc.explain(err)
			}
			mu.Lock()
			defer mu.Unlock()
			switch verdict(g, me) {
			case 1:
				r.Wins++
			case 0:
				r.Draws++
			default:
				r.Losses++
			}
			return nil
		}, mod)
		if err != nil {
			return out, fmt.Errorf("gauntlet %s vs %s: %w", in.Candidate.Name, o.Name, err)
		}
		r.Score = (float64(r.Wins) + 0.5*float64(r.Draws)) / float64(in.Games)
		out.Results = append(out.Results, r)
	}
	return out, nil
}

// verdict is 1 when seat me won (its outcome above every other seat's),
// 0 for a draw (an unfinished game or a tie at the top), -1 for a loss.
func verdict(g selfplay.Game, me int) int {
	if !g.Terminal || me >= len(g.Outcome) {
		return 0
	}
	best, top := g.Outcome[me], 0
	for s, o := range g.Outcome {
		if s == me {
			continue
		}
		if o > best {
			return -1
		}
		if o == best {
			top++
		}
	}
	if top > 0 {
		return 0
	}
	return 1
}

// parallel runs f for i in [0,n) on up to p workers, each with its own
// game instance.
func parallel(ctx context.Context, n, p int, f func(context.Context, *pluginhost.Games, int) error, mod *pluginhost.Module) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	errc := make(chan error, p)
	var wg sync.WaitGroup
	for w := 0; w < max(1, min(p, n)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			games, err := mod.NewGames(ctx, 1, 0)
			if err != nil {
				errc <- err
				cancel()
				return
			}
			defer games.Close()
			for i := range jobs {
				if err := f(ctx, games, i); err != nil {
					errc <- err
					cancel()
					return
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return ctx.Err()
	}
}
