package pluginrun

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/plugins"
)

// ErrPluginFailed is the non-retryable error type for failures of the
// plugin itself (trap, timeout, out of memory, bad module).
const ErrPluginFailed = "PluginFailed"

// Activities fetch plugins from the store and run them in the runtime.
type Activities struct {
	Runtime *plugins.Runtime
	Store   *pluginstore.Store
}

// Rollout loads the plugin and steps it with random actions.
func (a *Activities) Rollout(ctx context.Context, in Input) (plugins.RolloutStats, error) {
	wasm, err := a.Store.Module(ctx, in.PluginID)
	if err != nil {
		return plugins.RolloutStats{}, err
	}
	mod, err := a.Runtime.Load(ctx, wasm, plugins.LoadOptions{})
	if err != nil {
		return plugins.RolloutStats{}, pluginFailure(err)
	}
	defer mod.Close(ctx)
	env, err := mod.NewVecEnv(ctx, in.Envs, in.Seed)
	if err != nil {
		return plugins.RolloutStats{}, pluginFailure(err)
	}
	defer env.Close()
	st, err := plugins.Rollout(ctx, env, in.Steps, in.Seed)
	if err != nil {
		return st, pluginFailure(err)
	}
	return st, nil
}

func pluginFailure(err error) error {
	if errors.Is(err, plugins.ErrInvalidPlugin) || errors.Is(err, plugins.ErrTrap) || errors.Is(err, plugins.ErrTimeout) ||
		errors.Is(err, plugins.ErrOutOfMemory) || errors.Is(err, plugins.ErrGuestFault) || errors.Is(err, plugins.ErrProtocol) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrPluginFailed, err)
	}
	return fmt.Errorf("plugin run: %w", err)
}
