package training

import (
	"context"
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

// latest is the run's newest checkpoint; ErrNotFound without a store.
func (r *Runner) latest(ctx context.Context, run string) (checkpoint.Manifest, error) {
	if r.Checkpoints == nil {
		return checkpoint.Manifest{}, fmt.Errorf("run %s keeps no checkpoints: %w", run, checkpoint.ErrNotFound)
	}
	return r.Checkpoints.Latest(ctx, run)
}
