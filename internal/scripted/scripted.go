// Package scripted holds the fixed policies a multi-agent run can map
// agents to (learner.Policy.Script): opponents and baselines written for
// one game's observations.
package scripted

import (
	"fmt"
	"slices"
	"strings"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/sdk/go/envs/ipd"
	"github.com/trainyard/trainyard/sdk/go/envs/spread"
)

// Script is one fixed policy.
type Script struct {
	Name string `json:"name"`
	Doc  string `json:"doc"`
	// Env is the env whose observations it reads.
	Env string `json:"env"`
	// Act writes one action per observation (n agents' worth).
	Act learner.Act `json:"-"`
}

// All lists the scripts, by name.
var All = []Script{
	{Name: "always_cooperate", Env: ipd.Name, Doc: "cooperates every round", Act: constant(ipd.Cooperate)},
	{Name: "always_defect", Env: ipd.Name, Doc: "defects every round", Act: constant(ipd.Defect)},
	{Name: "tit_for_tat", Env: ipd.Name, Doc: "cooperates first, then plays the other's last move",
		Act: func(obs, actions []float32, n int) {
			for i := range n {
				actions[i] = float32(ipd.LastMove(obs[i*ipd.ObsDim : (i+1)*ipd.ObsDim]))
			}
		}},
	{Name: "nearest_landmark", Env: spread.Name, Doc: "agents in id order each claim the nearest unclaimed landmark and walk to it",
		Act: func(obs, actions []float32, n int) {
			for i := range n {
				actions[i] = float32(spread.NearestUnclaimed(obs[i*spread.ObsDim : (i+1)*spread.ObsDim]))
			}
		}},
}

func constant(a int) learner.Act {
	return func(_, actions []float32, n int) {
		for i := range n {
			actions[i] = float32(a)
		}
	}
}

// For is the script name for env; the error lists what there is.
func For(name, env string) (Script, error) {
	i := slices.IndexFunc(All, func(s Script) bool { return s.Name == name })
	if i < 0 {
		var have []string
		for _, s := range All {
			have = append(have, s.Name)
		}
		return Script{}, fmt.Errorf("unknown script %q (have %s)", name, strings.Join(have, ", "))
	}
	if s := All[i]; s.Env != env {
		return s, fmt.Errorf("script %s plays %s, not %s", name, s.Env, env)
	}
	return All[i], nil
}
