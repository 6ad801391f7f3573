// Package envs is the contract between environments and learners: a batched
// vector environment with declared spaces. Native Go environments and WASM
// plugins both implement VecEnv, so a learner never knows which one it drives.
//
// It lives in the guest SDK with the reference environments below it
// (cartpole, pendulum, native): the host and a plugin share one definition
// of the spaces, and a plugin built on a reference environment steps
// bit-identically to the native one.
package envs

// SpaceKind names a Gymnasium-style space.
type SpaceKind string

const (
	Box           SpaceKind = "box"
	Discrete      SpaceKind = "discrete"
	MultiDiscrete SpaceKind = "multi_discrete"
)

// Space describes observations or actions. Box uses Shape/Low/High,
// Discrete uses N, MultiDiscrete uses Nvec.
type Space struct {
	Kind  SpaceKind `json:"kind"`
	Shape []int     `json:"shape,omitempty"`
	Low   []float32 `json:"low,omitempty"`
	High  []float32 `json:"high,omitempty"`
	N     int       `json:"n,omitempty"`
	Nvec  []int     `json:"nvec,omitempty"`
}

// Dim is the number of float32 values one element of the space occupies in a
// flat buffer: the product of Shape for Box, 1 for Discrete, len(Nvec) for
// MultiDiscrete, 0 for an unset space (reward plugins that compose with any
// env leave theirs empty).
func (s Space) Dim() int {
	switch s.Kind {
	case Discrete:
		return 1
	case MultiDiscrete:
		return len(s.Nvec)
	case "":
		return 0
	default:
		d := 1
		for _, x := range s.Shape {
			d *= x
		}
		return d
	}
}

// Spec is what a learner needs to size its networks and buffers.
type Spec struct {
	Name            string `json:"name"`
	Observation     Space  `json:"observation_space"`
	Action          Space  `json:"action_space"`
	MaxEpisodeSteps int    `json:"max_episode_steps"`
	// Agents names a multi-agent env's agents (PettingZoo's
	// possible_agents); empty for a single-agent env. See MultiAgent.
	Agents []string `json:"agents,omitempty"`
	// ActionMask says the last Action.N values of every observation are
	// the agent's legal actions (1 legal, 0 not; Discrete actions only): a
	// learner that reads it never picks a masked action (RLlib's and
	// PettingZoo's action_mask, flattened into the observation).
	ActionMask bool `json:"action_mask,omitempty"`
}

// Mask is the action mask in one observation (nil without one).
func (s Spec) Mask(obs []float32) []float32 {
	if !s.ActionMask {
		return nil
	}
	return obs[len(obs)-s.Action.N:]
}

// MultiAgent reports whether the spec is a multi-agent env's.
//
// A multi-agent env is a VecEnv whose slots are agents: NumEnvs is
// instances × len(Agents), slot i·len(Agents)+a is agent a of instance i,
// and every agent observes Observation and acts in Action (an agent whose
// own spaces are smaller pads them). All of an instance's agents act at
// every step (PettingZoo's parallel API); each slot has its own reward and
// done flags. An agent that finishes before the others sits out: its slot
// reports reward 0 and no done flags, and its actions are ignored, until
// the last of its instance's agents finishes and the whole instance
// resets (finalObs is written for each slot at its own finishing step).
func (s Spec) MultiAgent() bool { return len(s.Agents) > 0 }

// VecEnv steps N independent instances of one environment in lock-step.
// Buffers are flat and caller-owned: obs has N*Observation.Dim() values,
// actions N*Action.Dim() (discrete actions are integral float32 values).
// Finished instances reset themselves inside Step; their last observation
// before the reset is written to finalObs (same layout as obs) and the
// post-reset observation to obs.
type VecEnv interface {
	Spec() Spec
	NumEnvs() int
	Reset(seed uint64, obs []float32) error
	Step(actions, obs, rewards []float32, terminated, truncated []bool, finalObs []float32) error
	Close() error
}
