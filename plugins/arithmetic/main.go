// Command arithmetic is a text environment as a WASM plugin: each episode is
// one arithmetic problem put to the language model behind the run's "llm"
// inference endpoint; the reward is 1 when the model's answer is right.
// The RL policy picks the prompt style (action 0: answer only, 1: work it
// out, answer on the last line); the model itself is what a BYO trainer
// (algorithm "command") fine-tunes from the trajectories the host records.
//
// It needs the http capability: metadata declares "http:llm", and the run
// must grant it (capabilities: {http: [llm]}).
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"fmt"

	"github.com/trainyard/trainyard/plugins/arithmetic/problem"
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/plugin"
)

// Endpoint is the inference endpoint name the plugin calls.
const Endpoint = "llm"

func init() {
	plugin.RegisterEnv(plugin.Metadata{
		Name:            "arithmetic",
		Version:         "1.0.0",
		Description:     "arithmetic problems answered by an LLM endpoint; reward 1 for a correct answer",
		Observation:     envs.Space{Kind: envs.Box, Shape: []int{3}, Low: []float32{0, 0, 0}, High: []float32{problem.MaxOperand, problem.MaxOperand, 2}},
		Action:          envs.Space{Kind: envs.Discrete, N: 2},
		MaxEpisodeSteps: 1,
		Capabilities:    []string{"http:" + Endpoint},
	}, func() plugin.Env { return &env{} })
}

func main() {}

type env struct {
	rng uint64
	p   problem.Problem
}

func (e *env) Seed(seed uint64) { e.rng = seed*0x9e3779b97f4a7c15 + 1 }

func (e *env) Reset(obs []float32) {
	e.p = problem.Draw(&e.rng)
	e.p.Observe(obs)
}

// Step asks the model. A failed call (timeout, rate limit, refusal) is a
// fault, not a zero reward: the host discards the instance and the rollout
// worker replays the episode, so no trajectory carries a reward the model
// never earned.
func (e *env) Step(action, obs []float32) (float32, bool, bool) {
	answer, err := plugin.Chat(Endpoint, []plugin.ChatMessage{
		{Role: "system", Content: "You are a careful calculator."},
		{Role: "user", Content: e.p.Prompt(int(action[0]))},
	}, 64)
	if err != nil {
		panic(fmt.Sprintf("ask %s: %v", Endpoint, err))
	}
	e.p.Observe(obs)
	return e.p.Reward(answer), true, false
}
