package pluginhost_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/trainyard/trainyard/internal/pluginhost"
)

// The three calls a user of the package needs: validate (at upload), load,
// and run an env plugin as an envs.VecEnv.
func Example() {
	ctx := context.Background()
	wasm, err := os.ReadFile(".cache/plugins/cartpole.wasm") // built by `make plugins`
	if err != nil {
		fmt.Println(err)
		return
	}
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: ".cache/wazero"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close(ctx)

	limits := pluginhost.Limits{MemoryPages: 512}
	if _, err := rt.Validate(ctx, wasm, limits); errors.Is(err, pluginhost.ErrInvalidPlugin) {
		fmt.Println("rejected:", err) // an API maps this to 422
		return
	}
	mod, err := rt.Load(ctx, wasm, pluginhost.LoadOptions{Limits: limits})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mod.Close(ctx)
	env, err := mod.NewVecEnv(ctx, 1024, 42)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer env.Close()
	stats, err := pluginhost.Rollout(ctx, env, 1_000_000, 42)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %.0f steps/s, %d episodes, mean return %.1f\n",
		mod.Metadata().Label(), stats.StepsPerSec, stats.Episodes, stats.MeanReturn)
}
