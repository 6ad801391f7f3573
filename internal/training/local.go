package training

import (
	"context"
	"errors"
	"fmt"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/pluginstore"
)

// ModuleSource serves plugin modules by sha256.
type ModuleSource interface {
	Module(ctx context.Context, sha string) ([]byte, error)
}

// Modules is a fixed set of plugin modules by sha256: what a local run
// resolved its env and reward plugins to.
type Modules map[string][]byte

// Module returns the module with that sha256.
func (m Modules) Module(_ context.Context, sha string) ([]byte, error) {
	if b, ok := m[sha]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("plugin %s: %w", short(sha), pluginstore.ErrNotFound)
}

func (r *Runner) module(ctx context.Context, sha string) ([]byte, error) {
	if r.Modules != nil {
		return r.Modules.Module(ctx, sha)
	}
	return r.Store.Module(ctx, sha)
}

// resume is the checkpoint a placement of the run starts from (Seq 0:
// none, or no store). A fenced placement (epoch > 0) claims the run first
// (checkpoint.Claim): a late write of an older one is then never newer.
func (r *Runner) resume(ctx context.Context, run string, epoch int64) (checkpoint.Manifest, error) {
	if r.Checkpoints == nil {
		return checkpoint.Manifest{}, nil
	}
	var m checkpoint.Manifest
	var err error
	if epoch > 0 {
		m, err = r.Checkpoints.Claim(ctx, run, epoch)
	} else {
		m, err = r.Checkpoints.Latest(ctx, run)
	}
	if err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
		return checkpoint.Manifest{}, fmt.Errorf("run %s: checkpoint to resume from: %w", run, err)
	}
	return m, nil
}
