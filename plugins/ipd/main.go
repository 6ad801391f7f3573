// Command ipd is the Iterated Prisoner's Dilemma (sdk/go/envs/ipd) as a
// multi-agent WASM env plugin: the native batch (sdk/go/envs/multiagent)
// through the SDK's VecEnv interface, bit-identical to native.
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"github.com/trainyard/trainyard/plugins/internal/spec"
	"github.com/trainyard/trainyard/sdk/go/envs/ipd"
	"github.com/trainyard/trainyard/sdk/go/envs/multiagent"
	"github.com/trainyard/trainyard/sdk/go/plugin"
)

func init() {
	plugin.RegisterVecEnv(spec.Metadata(ipd.Spec(), "1.0.0", "Iterated Prisoner's Dilemma, two agents, 100 rounds (T=5 R=3 P=1 S=0)"),
		func(n int) (plugin.VecEnv, error) {
			return multiagent.New(ipd.Spec(), n, func() multiagent.Env { return &ipd.Env{} })
		})
}

func main() {}
