package selfplay

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/selfplay/elo"
	"github.com/trainyard/trainyard/internal/selfplay/schedule"
	"github.com/trainyard/trainyard/internal/workspec"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/job"
)

// maxFailures bounds the activities one generation may lose to node
// deaths before the loop fails.
const maxFailures = 20

// Workflow runs generations until stopped or the generation budget is
// spent, continuing as new every ContinueEvery generations.
func Workflow(ctx workflow.Context, in Input) (State, error) {
	set := in.Settings.WithDefaults()
	st := in.State
	if st == nil {
		st = &State{Elo: elo.New(0), Generations: []Generation{}}
	}
	st.RunGenerations = 0
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (State, error) { return *st, nil }); err != nil {
		return *st, err
	}
	stop := false
	stops := workflow.GetSignalChannel(ctx, SignalStop)
	workflow.Go(ctx, func(ctx workflow.Context) {
		stops.Receive(ctx, nil)
		stop = true
	})
	l := &loop{in: in, set: set, st: st}
	if in.Queued {
		return l.runQueue(ctx, &stop, stops)
	}
	for {
		if stop {
			st.Phase, st.Reason = "stopped", "stopped by a user"
			return *st, nil
		}
		if set.Generations > 0 && st.Generation >= set.Generations {
			st.Phase, st.Reason = "finished", fmt.Sprintf("%d generations done", st.Generation)
			return *st, nil
		}
		if st.RunGenerations >= set.ContinueEvery {
			// Drain the stop signal into the next run's state.
			for stops.ReceiveAsync(nil) {
				stop = true
			}
			if stop {
				continue
			}
			in.State = st
			return *st, workflow.NewContinueAsNewError(ctx, Name, in)
		}
		if err := l.generation(ctx); err != nil {
			l.release(ctx)
			if temporal.IsCanceledError(err) || ctx.Err() != nil {
				st.Phase = "stopped"
				return *st, err
			}
			st.Phase, st.Reason = "failed", job.Reason(err)
			return *st, err
		}
		st.RunGenerations++
	}
}

type loop struct {
	in    Input
	set   Settings
	st    *State
	alloc *cluster.Allocation
	// exclude is the node that lost the last activity, avoided once.
	exclude string
	// job names the allocation of a work item (queued loops); empty: the
	// generation's.
	job string
	// phase is the generation's phase (or the work item's) holding the
	// allocation when each is placed on its own (ModelCommands.phased): ""
	// (self-play), "train" or "gauntlet".
	phase string
}

func (l *loop) gen() *Generation { return &l.st.Generations[len(l.st.Generations)-1] }

// generation plays, gates, exports, trains, evaluates and maybe promotes.
func (l *loop) generation(ctx workflow.Context) error {
	st, set := l.st, l.set
	st.Generation++
	n := st.Generation
	players := "mcts-rollouts"
	if set.Bootstrap == "heuristic" {
		players = "heuristic"
	}
	if st.Best != "" {
		players = "mcts:" + st.Best
	}
	st.Generations = append(st.Generations, Generation{N: n, State: "selfplay", Started: workflow.Now(ctx), Players: players})
	if len(st.Generations) > maxGenerations {
		st.Generations = append([]Generation(nil), st.Generations[len(st.Generations)-maxGenerations:]...)
	}
	g := l.gen()
	l.phase = ""
	defer l.release(ctx)
	phaseStart := workflow.Now(ctx)
	track := func(phase string) {
		now := workflow.Now(ctx)
		l.track(phase, now.Sub(phaseStart))
		phaseStart = now
	}
	end := func(state, why string) error {
		g.State, g.Reason = state, why
		now := workflow.Now(ctx)
		g.Ended = &now
		l.track("generation", now.Sub(g.Started))
		st.Completed++
		st.Phase, st.Reason = "idle", ""
		l.curves(ctx, g)
		return nil
	}
	seed := set.Seed + uint64(n)*1_000_003

	// 1. Self-play on a node; a retry resumes from the games in S3.
	prog, err := l.play(ctx, g, players, seed)
	if err != nil {
		return err
	}
	g.Games = prog.Synced
	st.TotalGames += prog.Played
	track("selfplay")

	// 2. Quality gate and export, on the control plane.
	st.Phase, g.State = "export", "export"
	ex, err := l.export(ctx, n)
	if err != nil {
		return err
	}
	g.Quality = ex.Report
	track("export")
	if !ex.Report.Passed {
		return end("rejected", "quality gate: "+ex.Report.Reason)
	}
	l.addDataset(g, ex)

	// 3. Train a candidate from the best on the recent exports.
	g.State = "train"
	l.enter(ctx, "train")
	tr, err := l.train(ctx, n, st.BestKey, seed)
	if err != nil {
		return err
	}
	g.Model, g.ModelKey, g.TrainLoss, g.TrainNode = tr.Model, tr.Key, tr.Loss, l.alloc.Node
	track("train")

	// 4. Gauntlet: the current best and the fixed baselines.
	g.State = "gauntlet"
	l.enter(ctx, "gauntlet")
	ga, err := l.gauntlet(ctx, n, Opponent{Name: tr.Model, Key: tr.Key}, seed)
	if err != nil {
		return err
	}
	g.GauntletNode = l.alloc.Node
	l.release(ctx)
	track("gauntlet")

	// 5. Elo and promotion.
	promote, err := l.rate(ctx, n, g, tr.Model, tr.Key, ga)
	if err != nil {
		return err
	}
	if promote {
		return end("promoted", "")
	}
	return end("kept", fmt.Sprintf("%s stays best", st.Best))
}

// play runs generation n's self-play batch on a node; a retry resumes
// from the games in S3.
func (l *loop) play(ctx workflow.Context, g *Generation, players string, seed uint64) (PlayProgress, error) {
	st, set, n := l.st, l.set, g.N
	games := set.GamesPerGeneration
	if st.BestKey == "" {
		games = set.BootstrapGames
	}
	var prog PlayProgress
	err := l.onNode(ctx, "selfplay", func(ctx workflow.Context) error {
		g.Attempts++
		g.Node = l.alloc.Node
		actx := workflow.WithActivityOptions(ctx, l.nodeOptions(max(10*time.Second, 4*set.SyncInterval)))
		err := workflow.ExecuteActivity(actx, (*AgentActivities).SelfplayBatch, PlayInput{
			LoopID: l.in.LoopID, Config: l.in.Config, GamePlugin: l.in.GamePlugin, Generation: n, Attempt: g.Attempts,
			Games: games, ModelKey: st.BestKey, Players: players, Simulations: set.Simulations, Search: set.Search, MaxMoves: set.MaxMoves,
			Parallel: set.Parallel, SyncInterval: set.SyncInterval, Seed: seed, Model: set.Model, GPUs: l.alloc.GPUs,
		}).Get(ctx, &prog)
		if g.Attempts > 1 && (err == nil || prog.Resumed > 0) {
			g.Resumed = append(g.Resumed, prog.Resumed)
		}
		g.EvalBatch = prog.EvalBatch
		return err
	})
	return prog, err
}

// export grades generation n's games and exports the clean ones, on the
// control plane.
func (l *loop) export(ctx workflow.Context, n int) (ExportResult, error) {
	var ex ExportResult
	ectx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		// A control worker killed mid-export loses the attempt after one
		// heartbeat timeout, not the whole start-to-close (the export
		// beats every exportBeat).
		HeartbeatTimeout: 6 * exportBeat,
		RetryPolicy:      &temporal.RetryPolicy{MaximumAttempts: 5, NonRetryableErrorTypes: []string{ErrFailed}},
	})
	err := workflow.ExecuteActivity(ectx, (*Activities).SelfplayExport, ExportInput{
		LoopID: l.in.LoopID, Config: l.in.Config, Generation: n, Settings: l.set,
	}).Get(ctx, &ex)
	return ex, err
}

// addDataset puts a passed export into the training window.
func (l *loop) addDataset(g *Generation, ex ExportResult) {
	st := l.st
	g.Dataset, g.Positions = ex.Dataset, ex.Positions
	st.Datasets = append(st.Datasets, ex.Dataset)
	if len(st.Datasets) > l.set.TrainWindow {
		st.Datasets = append([]string(nil), st.Datasets[len(st.Datasets)-l.set.TrainWindow:]...)
	}
}

// train trains generation n's candidate from the model at fromKey (fresh
// when empty) on the training window, on a node.
func (l *loop) train(ctx workflow.Context, n int, fromKey string, seed uint64) (TrainResult, error) {
	var tr TrainResult
	err := l.onNode(ctx, "train", func(ctx workflow.Context) error {
		actx := workflow.WithActivityOptions(ctx, l.nodeOptions(30*time.Second))
		return workflow.ExecuteActivity(actx, (*AgentActivities).SelfplayTrain, TrainInput{
			LoopID: l.in.LoopID, Config: l.in.Config, GamePlugin: l.in.GamePlugin, Generation: n, Model: ModelName(l.in.LoopID, n),
			Datasets: l.st.Datasets, FromKey: fromKey, Epochs: l.set.TrainEpochs, Seed: seed, ModelCommands: l.set.Model, GPUs: l.alloc.GPUs,
		}).Get(ctx, &tr)
	})
	return tr, err
}

// gauntlet pits cand against the current best and the fixed baselines,
// on a node.
func (l *loop) gauntlet(ctx workflow.Context, n int, cand Opponent, seed uint64) (GauntletResult, error) {
	st, set := l.st, l.set
	opps := []Opponent{}
	if st.Best != "" {
		opps = append(opps, Opponent{Name: st.Best, Key: st.BestKey})
	}
	opps = append(opps, Opponent{Name: elo.Random}, Opponent{Name: elo.Heuristic})
	var ga GauntletResult
	err := l.onNode(ctx, "gauntlet", func(ctx workflow.Context) error {
		actx := workflow.WithActivityOptions(ctx, l.nodeOptions(30*time.Second))
		return workflow.ExecuteActivity(actx, (*AgentActivities).SelfplayGauntlet, GauntletInput{
			LoopID: l.in.LoopID, Config: l.in.Config, GamePlugin: l.in.GamePlugin, Generation: n,
			Candidate: cand, Opponents: opps, Games: set.EvalGames,
			Simulations: set.Simulations, Search: set.Search, MaxMoves: set.MaxMoves, Parallel: set.Parallel, Seed: seed + 7, Model: set.Model, GPUs: l.alloc.GPUs,
		}).Get(ctx, &ga)
	})
	return ga, err
}

// rate records the gauntlet's matches in the Elo table and promotes the
// candidate when it scored promote_score against the best (the first
// model: against random); g gets the results.
func (l *loop) rate(ctx workflow.Context, n int, g *Generation, model, key string, ga GauntletResult) (bool, error) {
	st, set := l.st, l.set
	now := workflow.Now(ctx)
	promote := st.Best == ""
	for i, r := range ga.Results {
		m, err := st.Elo.Record(elo.Match{Config: l.in.Config, A: model, B: r.Opponent, Wins: r.Wins, Draws: r.Draws, Losses: r.Losses, Generation: n, At: now})
		if err != nil {
			return false, temporal.NewNonRetryableApplicationError(err.Error(), ErrFailed, err)
		}
		ga.Results[i].EloBefore, ga.Results[i].EloAfter = m.EloA, st.Elo.Get(l.in.Config, model).Elo
		if r.Opponent == st.Best {
			promote = r.Score >= set.PromoteScore
		}
		if st.Best == "" && r.Opponent == elo.Random {
			// The first model must at least beat random play.
			promote = r.Score >= set.PromoteScore
		}
	}
	g.Gauntlet = ga.Results
	g.Elo = st.Elo.Get(l.in.Config, model).Elo
	if promote {
		st.Elo.Promote(l.in.Config, model, now)
		st.Best, st.BestKey = model, key
		g.Promoted = true
	}
	return promote, nil
}

// track adds a phase's duration to the loop's history of durations.
func (l *loop) track(phase string, d time.Duration) {
	if l.st.Durations == nil {
		l.st.Durations = map[string]*schedule.Durations{}
	}
	if l.st.Durations[phase] == nil {
		l.st.Durations[phase] = &schedule.Durations{}
	}
	l.st.Durations[phase].Add(d)
}

// nodeOptions: an agent activity on the allocated node, heartbeating, not
// retried in place (a lost node is handled by onNode).
func (l *loop) nodeOptions(heartbeat time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              l.alloc.Queue,
		ScheduleToStartTimeout: 30 * time.Second,
		StartToCloseTimeout:    12 * time.Hour,
		HeartbeatTimeout:       heartbeat,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	}
}

// onNode runs step on an allocated node; when the node (or its agent)
// goes away the allocation is given back, another is taken (avoiding the
// lost node once) and the step runs again.
func (l *loop) onNode(ctx workflow.Context, phase string, step func(workflow.Context) error) error {
	for {
		if l.alloc == nil {
			l.st.Phase = "allocating"
			if err := l.allocate(ctx); err != nil {
				return err
			}
		}
		l.st.Phase, l.st.Node, l.st.Reason = phase, l.alloc.Node, ""
		err := step(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == ErrFailed {
			return temporal.NewNonRetryableApplicationError(app.Message(), ErrFailed, nil)
		}
		if errors.As(err, &app) && app.Type() == ErrDrained {
			// Nothing was lost: the activity synced before it returned.
			l.st.Drains++
			l.st.Reason = fmt.Sprintf("%s moved off node %s: %s", phase, l.alloc.Node, app.Message())
			l.exclude = l.alloc.Node
			l.release(ctx)
			continue
		}
		l.st.Failures++
		if l.st.Failures >= maxFailures {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%d activities lost, the last: %s", l.st.Failures, job.Reason(err)), ErrFailed, nil)
		}
		l.st.Reason = fmt.Sprintf("%s on node %s lost: %s; placing it again", phase, l.alloc.Node, job.Reason(err))
		l.exclude = l.alloc.Node
		l.release(ctx)
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

// ModelName is generation n's candidate: "gen3-1a2b3c4d" (the loop's tag
// keeps names apart across loops of one config).
func ModelName(loopID string, n int) string {
	tag := loopID
	if i := strings.LastIndexByte(loopID, '/'); i >= 0 {
		tag = loopID[i+1:]
	}
	return fmt.Sprintf("gen%d-%s", n, tag)
}

func (l *loop) jobID() string {
	if l.job != "" {
		return l.job
	}
	id := fmt.Sprintf("%s/gen-%d", l.in.LoopID, l.st.Generation)
	if l.phase != "" {
		id += "/" + l.phase
	}
	return id
}

// enter moves a phased loop (ModelCommands.phased) to phase's own
// allocation: the one it holds is given back, and the phase's onNode takes
// the next. Other loops keep the generation's one allocation.
func (l *loop) enter(ctx workflow.Context, phase string) {
	if l.job != "" || !l.set.Model.phased() || l.phase == phase {
		return
	}
	l.release(ctx)
	l.phase = phase
}

// phaseWork is what one of a loop's allocations asks for: the
// generation's resources, or in a phased loop the phase's own (kind
// training with the trainer's resources; kind evaluation for the
// gauntlet), with the evaluators of your model it runs added: one per
// model of yours that plays (models: 1 once there is a best), plus the
// candidate in the gauntlet.
func phaseWork(id, config string, set Settings, phase string, models int) workspec.Spec {
	ws := SelfPlayWork(id, config, set)
	if !set.Model.phased() {
		return ws
	}
	r := &ws.Roles[0]
	add := func(res *Resources, n int) {
		if res != nil {
			r.CPUs += float64(n) * res.CPUs
			r.GPUs += float64(n * res.GPUs)
			r.MemoryMB += int64(n) * res.MemoryMB
		}
	}
	switch phase {
	case "train":
		ws.Kind, r.Name = workspec.KindTraining, workspec.RoleTrainer
		if t := set.Model.TrainerResources; t != nil {
			r.CPUs, r.GPUs, r.MemoryMB = t.CPUs, float64(t.GPUs), t.MemoryMB
		}
	case "gauntlet":
		ws.Kind, r.Name = workspec.KindEvaluation, workspec.RoleEvaluator
		add(set.Model.EvaluatorResources, models+1) // the best and the candidate
	default:
		add(set.Model.EvaluatorResources, models)
	}
	return ws
}

// LoopWork is every allocation a loop will ask for, each as it is once
// your model plays and a best exists: the self-play allocation (kind
// selfplay), and in a phased loop the training and gauntlet ones too
// (kinds training and evaluation). The API preflights each at start, so a
// phase that no node or policy would ever take is refused then, not found
// waiting generations later.
func LoopWork(id, config string, set Settings) []workspec.Spec {
	set = set.WithDefaults()
	works := []workspec.Spec{phaseWork(id, config, set, "", 1)}
	if set.Model.phased() {
		for _, phase := range []string{"train", "gauntlet"} {
			works = append(works, phaseWork(id+"/"+phase, config, set, phase, 1))
		}
	}
	return works
}

// allocate asks the cluster for a node until it gets one; the reason it
// waits is visible in the state. The node that lost the last generation is
// asked around until nothing else could ever fit.
func (l *loop) allocate(ctx workflow.Context) error {
	ws := l.work()
	r := ws.Roles[0]
	a, err := job.Place(ctx, job.Placement{
		Cluster: l.in.Cluster,
		Request: cluster.AllocateRequest{JobID: l.jobID(), CPUs: r.CPUs, GPUs: int(r.GPUs), MemoryMB: r.MemoryMB, Work: &ws},
		Exclude: func() []string {
			if l.exclude == "" {
				return nil
			}
			return []string{l.exclude}
		},
		Fallback: func(err error) bool {
			var app *temporal.ApplicationError
			if errors.As(err, &app) && app.Type() == cluster.ErrInfeasible {
				l.exclude = "" // the lost node may be the only one that fits
				return true
			}
			return false
		},
		Waiting: func(why string, _ bool) { l.st.Reason = "waiting for a node: " + why },
	})
	if err != nil {
		return err
	}
	l.alloc, l.exclude = &a, ""
	return nil
}

// work is the loop's work description: self-play of its game config, or
// a phased loop's training or gauntlet (kinds training and evaluation, so
// the policy's tier preferences and provider rules for them apply).
func (l *loop) work() workspec.Spec {
	models := 0 // evaluators of your model the phase runs besides a candidate
	if l.st.Best != "" {
		models = 1
	}
	return phaseWork(l.jobID(), l.in.Config, l.set, l.phase, models)
}

// SelfPlayWork is the work description of one self-play allocation (a
// generation, or a queued work item): kind selfplay, keyed by the game
// config for quotas and board→VRAM routing.
func SelfPlayWork(id, config string, set Settings) workspec.Spec {
	set = set.WithDefaults()
	return workspec.Spec{Name: id, Kind: workspec.KindSelfPlay, Config: config,
		Roles: []workspec.Role{{Name: workspec.RoleSelfPlay, Count: 1, CPUs: set.CPUs, GPUs: float64(set.GPUs), MemoryMB: set.MemoryMB}}}
}

// release gives the node back (disconnected: a cancelled loop too).
func (l *loop) release(ctx workflow.Context) {
	if l.alloc == nil {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.SignalExternalWorkflow(dctx, cluster.WorkflowID(l.in.Cluster), "", cluster.SignalRelease, cluster.Release{JobID: l.jobID()}).Get(dctx, nil)
	l.alloc, l.st.Node = nil, ""
}
