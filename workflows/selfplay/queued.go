package selfplay

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/selfplay/populate"
	"github.com/trainyard/trainyard/workflows/job"
)

// maxWorkRecords bounds the work items kept in a queued loop's state.
const maxWorkRecords = 50

// runQueue is a populator-driven loop: instead of whole generations it
// runs the work items the populator sends, one at a time, each on its own
// allocation, so the cluster sees self-play, training and tournaments as
// separate work in the populator's mix:
//   - selfplay: a new generation's batch, quality gate and export (the
//     export joins the training window);
//   - training: a candidate trained on the window, continuing from the
//     latest unrated candidate (else the best) — skipped without an export
//     no training used yet;
//   - tournament: the latest candidate's gauntlet, Elo and promotion —
//     skipped without a candidate.
//
// It stops after the item in flight when signalled; it continues as new
// every 3 × continue_every items, its queue carried in its state.
func (l *loop) runQueue(ctx workflow.Context, stop *bool, stops workflow.ReceiveChannel) (State, error) {
	// Queued loops are new: nothing recorded before this version runs here.
	_ = workflow.GetVersion(ctx, "selfplay-queued-loop", workflow.DefaultVersion, 1)
	st := l.st
	st.Queued = true
	if st.WorkDone == nil {
		st.WorkDone = map[string]int{}
	}
	work := workflow.GetSignalChannel(ctx, SignalWork)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var items []WorkItem
			work.Receive(ctx, &items)
			st.Queue = append(st.Queue, items...)
		}
	})
	for {
		if *stop {
			st.Phase, st.Reason = "stopped", "stopped by a user or the populator"
			return *st, nil
		}
		if st.RunGenerations >= 3*l.set.ContinueEvery {
			for stops.ReceiveAsync(nil) {
				*stop = true
			}
			if *stop {
				continue
			}
			for {
				var items []WorkItem
				if !work.ReceiveAsync(&items) {
					break
				}
				st.Queue = append(st.Queue, items...)
			}
			in := l.in
			in.State = st
			return *st, workflow.NewContinueAsNewError(ctx, Name, in)
		}
		if len(st.Queue) == 0 {
			st.Phase, st.Reason = "idle", "waiting for work from the queue populator"
			if err := workflow.Await(ctx, func() bool { return *stop || len(st.Queue) > 0 }); err != nil {
				return *st, err
			}
			continue
		}
		item := st.Queue[0]
		st.Queue = st.Queue[1:]
		rec := &WorkRecord{WorkItem: item, Started: workflow.Now(ctx)}
		st.Current = rec
		l.job = fmt.Sprintf("%s/work-%d-%s", l.in.LoopID, item.ID, item.Kind)
		if l.set.Model.phased() {
			l.phase = itemPhase[item.Kind]
		}
		err := l.runItem(ctx, rec)
		l.release(ctx)
		l.job, l.phase = "", ""
		now := workflow.Now(ctx)
		rec.Ended, st.LastWork, st.Current = &now, &now, nil
		if err != nil {
			if temporal.IsCanceledError(err) || ctx.Err() != nil {
				st.Phase = "stopped"
				return *st, err
			}
			st.Phase, st.Reason = "failed", job.Reason(err)
			return *st, err
		}
		if !rec.Skipped {
			st.WorkDone[item.Kind]++
		}
		st.Work = append(st.Work, *rec)
		if len(st.Work) > maxWorkRecords {
			st.Work = append([]WorkRecord(nil), st.Work[len(st.Work)-maxWorkRecords:]...)
		}
		st.Phase, st.Reason = "idle", ""
		st.RunGenerations++
	}
}

// itemPhase: the phase whose allocation a work item takes when your
// model's commands have resources (loop.request).
var itemPhase = map[string]string{populate.Training: "train", populate.Tournament: "gauntlet"}

// runItem runs one work item, filling its record.
func (l *loop) runItem(ctx workflow.Context, rec *WorkRecord) error {
	st, set := l.st, l.set
	start := workflow.Now(ctx)
	switch rec.Kind {
	case populate.Selfplay:
		st.Generation++
		n := st.Generation
		players := "mcts-rollouts"
		if set.Bootstrap == "heuristic" {
			players = "heuristic"
		}
		if st.Best != "" {
			players = "mcts:" + st.Best
		}
		st.Generations = append(st.Generations, Generation{N: n, State: "selfplay", Started: start, Players: players})
		if len(st.Generations) > maxGenerations {
			st.Generations = append([]Generation(nil), st.Generations[len(st.Generations)-maxGenerations:]...)
		}
		g := l.gen()
		rec.Generation = n
		seed := set.Seed + uint64(n)*1_000_003
		prog, err := l.play(ctx, g, players, seed)
		if err != nil {
			return err
		}
		g.Games, rec.Games, rec.Node = prog.Synced, prog.Played, g.Node
		st.TotalGames += prog.Played
		l.track("selfplay", workflow.Now(ctx).Sub(start))
		st.Phase, g.State = "export", "export"
		ex, err := l.export(ctx, n)
		if err != nil {
			return err
		}
		g.Quality = ex.Report
		now := workflow.Now(ctx)
		if !ex.Report.Passed {
			g.State, g.Reason, g.Ended = "rejected", "quality gate: "+ex.Report.Reason, &now
			st.Completed++
			l.curves(ctx, g)
			rec.Result = fmt.Sprintf("%d games, rejected: %s", prog.Synced, ex.Report.Reason)
			return nil
		}
		l.addDataset(g, ex)
		g.State = "exported"
		st.Fresh++
		rec.Result = fmt.Sprintf("%d games, quality %.2f, %d positions exported", prog.Synced, ex.Report.Score, ex.Positions)
	case populate.Training:
		if st.Fresh == 0 || len(st.Generations) == 0 {
			rec.Skipped, rec.Result = true, "skipped: no export since the last training"
			return nil
		}
		g := l.gen()
		n := g.N
		rec.Generation = n
		from := st.BestKey
		if st.CandidateKey != "" {
			from = st.CandidateKey
		}
		g.State = "train"
		tr, err := l.train(ctx, n, from, set.Seed+uint64(n)*1_000_003)
		if err != nil {
			return err
		}
		rec.Node, g.TrainNode = l.alloc.Node, l.alloc.Node
		g.Model, g.ModelKey, g.TrainLoss, g.State = tr.Model, tr.Key, tr.Loss, "trained"
		st.Candidate, st.CandidateKey, st.Fresh = tr.Model, tr.Key, 0
		l.track("train", workflow.Now(ctx).Sub(start))
		rec.Result = fmt.Sprintf("trained %s, loss %.4f", tr.Model, tr.Loss)
	case populate.Tournament:
		var g *Generation
		for i := range st.Generations {
			if st.Candidate != "" && st.Generations[i].Model == st.Candidate {
				g = &st.Generations[i]
			}
		}
		if g == nil {
			rec.Skipped, rec.Result = true, "skipped: no candidate to rate"
			st.Candidate, st.CandidateKey = "", ""
			return nil
		}
		rec.Generation = g.N
		g.State = "gauntlet"
		ga, err := l.gauntlet(ctx, g.N, Opponent{Name: st.Candidate, Key: st.CandidateKey}, set.Seed+uint64(g.N)*1_000_003)
		if err != nil {
			return err
		}
		rec.Node, g.GauntletNode = l.alloc.Node, l.alloc.Node
		l.release(ctx)
		l.track("gauntlet", workflow.Now(ctx).Sub(start))
		promote, err := l.rate(ctx, g.N, g, st.Candidate, st.CandidateKey, ga)
		if err != nil {
			return err
		}
		now := workflow.Now(ctx)
		g.Ended = &now
		st.Completed++
		g.State = "kept"
		rec.Result = fmt.Sprintf("%s rated %.0f, %s stays best", st.Candidate, g.Elo, st.Best)
		if promote {
			g.State = "promoted"
			rec.Result = fmt.Sprintf("%s rated %.0f, promoted", st.Candidate, g.Elo)
		}
		l.curves(ctx, g)
		st.Candidate, st.CandidateKey = "", ""
	default:
		rec.Skipped, rec.Result = true, "skipped: unknown kind "+rec.Kind
	}
	return nil
}
