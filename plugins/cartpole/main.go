// Command cartpole is CartPole-v1 as a WASM plugin. It wraps the native Go
// reference (sdk/go/envs/cartpole) through the SDK's single-env interface,
// so the plugin steps bit-identically to the native VecEnv.
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"github.com/trainyard/trainyard/plugins/internal/spec"
	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/plugin"
)

func init() {
	plugin.RegisterEnv(spec.Metadata(cartpole.Spec(), "1.0.0", "CartPole-v1, Gymnasium dynamics"),
		func() plugin.Env { return &env{} })
}

func main() {}

// env adapts cartpole.Env (integer action) to plugin.Env. Truncation at 500
// steps comes from cartpole.Env itself (the SDK's limit agrees).
type env struct{ cartpole.Env }

func (e *env) Step(action, obs []float32) (float32, bool, bool) {
	return e.Env.Step(int(action[0]), obs)
}
