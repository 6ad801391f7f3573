// Command httpprobe is a test plugin for the http capability: action[0]
// picks an endpoint name from a fixed list and step asks it for a chat
// completion; reward is the HTTP status, or minus the host's refusal code,
// so tests see every outcome without a trap.
package main

import (
	"errors"

	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/plugin"
)

// Endpoints by action: "llm" is declared; "other" is not.
var endpoints = []string{"llm", "other"}

func init() {
	plugin.RegisterEnv(plugin.Metadata{
		Name: "httpprobe", Version: "1.0.0",
		Observation:  envs.Space{Kind: envs.Box, Shape: []int{1}},
		Action:       envs.Space{Kind: envs.Discrete, N: len(endpoints)},
		Capabilities: []string{"http:llm"},
	}, func() plugin.Env { return &env{} })
}

func main() {}

type env struct{}

func (*env) Seed(uint64)         {}
func (*env) Reset(obs []float32) { obs[0] = 0 }

func (*env) Step(action, obs []float32) (float32, bool, bool) {
	status, resp, err := plugin.HTTP(endpoints[int(action[0])], "/v1/chat/completions",
		[]byte(`{"messages":[{"role":"user","content":"ping"}]}`))
	var he *plugin.HTTPError
	switch {
	case errors.As(err, &he):
		obs[0] = float32(len(he.Message))
		return float32(-he.Code), false, false
	case err != nil:
		panic(err)
	}
	obs[0] = float32(len(resp))
	return float32(status), false, false
}
