// Command spread is the cooperative landmark game (sdk/go/envs/spread) as a
// multi-agent WASM env plugin with an action mask: the native batch
// (sdk/go/envs/multiagent) through the SDK's VecEnv interface,
// bit-identical to native.
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"github.com/trainyard/trainyard/plugins/internal/spec"
	"github.com/trainyard/trainyard/sdk/go/envs/multiagent"
	"github.com/trainyard/trainyard/sdk/go/envs/spread"
	"github.com/trainyard/trainyard/sdk/go/plugin"
)

func init() {
	plugin.RegisterVecEnv(spec.Metadata(spread.Spec(), "1.0.0", "Cooperative landmark covering: three agents, three landmarks on a 5×5 grid, 25 steps, shared reward, action mask"),
		func(n int) (plugin.VecEnv, error) {
			return multiagent.New(spread.Spec(), n, func() multiagent.Env { return &spread.Env{} })
		})
}

func main() {}
