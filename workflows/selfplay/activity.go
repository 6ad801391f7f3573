package selfplay

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/selfplay"
	"github.com/trainyard/trainyard/internal/selfplay/npz"
	"github.com/trainyard/trainyard/internal/selfplay/quality"
	"github.com/trainyard/trainyard/internal/temporalx"
)

// Activities run on the control plane.
type Activities struct {
	Store *objstore.Store
	// Client queries cluster workflows (the idle daemon's GPU view).
	Client client.Client
}

// SelfplayExport grades a generation's synced games with the quality gate and,
// when they pass, writes the clean ones as a NumPy .npz to S3.
func (a *Activities) SelfplayExport(ctx context.Context, in ExportInput) (ExportResult, error) {
	defer temporalx.BeatEvery(ctx, exportBeat)()
	numbered, shape, err := ReadGames(ctx, a.Store, in.LoopID, in.Generation)
	if err != nil {
		return ExportResult{}, err
	}
	games := make([]selfplay.Game, len(numbered))
	for i, g := range numbered {
		games[i] = g.Game
	}
	rep := quality.Check(games, in.Settings.Quality)
	res := ExportResult{Report: rep}
	if !rep.Passed {
		return res, nil
	}
	d, err := npz.FromGames(rep.Kept(games), shape)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("export generation %d: %v", in.Generation, err), ErrFailed, err)
	}
	b, err := d.Encode()
	if err != nil {
		return res, err
	}
	key := DatasetKey(in.LoopID, in.Generation)
	if err := put(ctx, a.Store, key, b, "application/octet-stream"); err != nil {
		return res, err
	}
	res.Dataset, res.Positions = key, d.Len()
	return res, nil
}

// exportBeat is how often an export heartbeats.
const exportBeat = 5 * time.Second
