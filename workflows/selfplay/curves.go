package selfplay

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/scalars"
)

// CurvesInput is one finished generation of a loop, for its curves.
type CurvesInput struct {
	LoopID     string     `json:"loop_id"`
	Generation Generation `json:"generation"`
	TotalGames int        `json:"total_games"`
}

// SelfplayCurves records a finished generation as one step (the
// generation number) of the loop's curves: TensorBoard event files and
// metrics.csv under scalars.LoopPrefix. A retry rewrites the same step.
func (a *Activities) SelfplayCurves(ctx context.Context, in CurvesInput) error {
	log := scalars.Log{Store: a.Store, Prefix: scalars.LoopPrefix(in.LoopID)}
	if err := log.Write(ctx, []scalars.Step{GenerationStep(in.Generation, in.TotalGames)}); err != nil {
		return fmt.Errorf("loop %s generation %d: curves: %w", in.LoopID, in.Generation.N, err)
	}
	return nil
}

// GenerationStep is what a generation adds to the loop's curves: its
// games and quality gate, and as far as it got the positions exported,
// the candidate's training loss, its gauntlet scores and Elo, and whether
// it was promoted.
func GenerationStep(g Generation, totalGames int) scalars.Step {
	s := scalars.Step{Step: int64(g.N)}
	if g.Ended != nil {
		s.WallTime = float64(g.Ended.UnixNano()) / 1e9
	}
	add := func(tag string, v float64) { s.Values = append(s.Values, scalars.Value{Tag: tag, Value: v}) }
	bit := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	add("games", float64(g.Games))
	add("total_games", float64(totalGames))
	add("quality/score", g.Quality.Score)
	add("quality/clean", float64(g.Quality.Clean))
	add("quality/decisive_ratio", g.Quality.DecisiveRatio())
	add("quality/passed", bit(g.Quality.Passed))
	if g.Ended != nil {
		add("duration_seconds", g.Ended.Sub(g.Started).Seconds())
	}
	if g.Dataset != "" {
		add("positions", float64(g.Positions))
	}
	if g.Model != "" {
		add("train_loss", g.TrainLoss)
	}
	for _, r := range g.Gauntlet {
		add("gauntlet/"+r.Opponent+"/score", r.Score)
	}
	if len(g.Gauntlet) > 0 {
		add("elo", g.Elo)
		add("promoted", bit(g.Promoted))
	}
	return s
}

// curves records generation g, just ended, in the loop's curves (on the
// control plane). They are a by-product: a failure is logged, the loop
// goes on.
func (l *loop) curves(ctx workflow.Context, g *Generation) {
	// Versioned: histories from before curves ran no such activity.
	if workflow.GetVersion(ctx, "generation-curves", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	cctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	if err := workflow.ExecuteActivity(cctx, (*Activities).SelfplayCurves, CurvesInput{
		LoopID: l.in.LoopID, Generation: *g, TotalGames: l.st.TotalGames,
	}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("generation curves not written", "loop", l.in.LoopID, "generation", g.N, "error", err)
	}
}
