package pluginrun

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/internal/temporalx"
)

// ErrPluginFailed is the non-retryable error type for failures of the
// plugin itself (trap, timeout, out of memory, bad module).
const ErrPluginFailed = "PluginFailed"

// Activities fetch plugins from the store and run them in the runtime.
type Activities struct {
	Runtime *pluginhost.Runtime
	Store   *pluginstore.Store
}

// Rollout loads the plugin and steps it with random actions.
func (a *Activities) Rollout(ctx context.Context, in Input) (pluginhost.RolloutStats, error) {
	defer temporalx.BeatEvery(ctx, beat)()
	wasm, err := a.Store.Module(ctx, in.PluginID)
	if err != nil {
		return pluginhost.RolloutStats{}, err
	}
	mod, err := a.Runtime.Load(ctx, wasm, pluginhost.LoadOptions{})
	if err != nil {
		return pluginhost.RolloutStats{}, pluginFailure(err)
	}
	defer mod.Close(ctx)
	env, err := mod.NewVecEnv(ctx, mod.Metadata().Slots(in.Envs), in.Seed)
	if err != nil {
		return pluginhost.RolloutStats{}, pluginFailure(err)
	}
	defer env.Close()
	st, err := pluginhost.Rollout(ctx, env, in.Steps, in.Seed)
	if err != nil {
		return st, pluginFailure(err)
	}
	return st, nil
}

func pluginFailure(err error) error {
	if errors.Is(err, pluginhost.ErrInvalidPlugin) || errors.Is(err, pluginhost.ErrTrap) || errors.Is(err, pluginhost.ErrTimeout) ||
		errors.Is(err, pluginhost.ErrOutOfMemory) || errors.Is(err, pluginhost.ErrGuestFault) || errors.Is(err, pluginhost.ErrProtocol) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrPluginFailed, err)
	}
	return fmt.Errorf("plugin run: %w", err)
}
