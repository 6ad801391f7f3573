// Package ipd is the Iterated Prisoner's Dilemma of seed 001's lab as a
// two-agent game (sdk/go/envs/multiagent): each round both agents cooperate
// (action 0) or defect (1) at once and are paid T=5, R=3, P=1, S=0; an
// agent observes the last Memory rounds, its own moves then the other's,
// each one-hot (cooperate, defect), zeros before the first round. Episodes
// are truncated after Rounds rounds: cooperating with tit-for-tat is the
// best response when γ ≥ (T−R)/(R−S) = 2/3.
package ipd

import (
	"fmt"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

const (
	Name   = "PrisonersDilemma-v0"
	Rounds = 100
	Memory = 2

	Cooperate = 0
	Defect    = 1

	// The payoffs: temptation, reward, punishment, sucker's.
	T, R, P, S = 5, 3, 1, 0
)

// Agents are the two players.
var Agents = []string{"agent_0", "agent_1"}

// ObsDim is one agent's observation width.
const ObsDim = 2 * Memory * 2

// Spec is the game's env spec.
func Spec() envs.Spec {
	low, high := make([]float32, ObsDim), make([]float32, ObsDim)
	for i := range high {
		high[i] = 1
	}
	return envs.Spec{
		Name:            Name,
		Observation:     envs.Space{Kind: envs.Box, Shape: []int{ObsDim}, Low: low, High: high},
		Action:          envs.Space{Kind: envs.Discrete, N: 2},
		MaxEpisodeSteps: Rounds,
		Agents:          append([]string(nil), Agents...),
	}
}

// Payoff is what a player moving mine against theirs is paid.
func Payoff(mine, theirs int) float32 {
	switch {
	case mine == Cooperate && theirs == Cooperate:
		return R
	case mine == Cooperate:
		return S
	case theirs == Cooperate:
		return T
	default:
		return P
	}
}

// Env is one game. history[r][p] is player p's move r rounds ago plus
// one (0: no round yet).
type Env struct {
	history [Memory][2]byte
}

func (e *Env) Seed(uint64) {} // the game has no randomness

func (e *Env) Reset(obs []float32) {
	e.history = [Memory][2]byte{}
	e.observe(obs)
}

func (e *Env) Step(actions, obs, rewards []float32, terminated []bool) {
	a0, a1 := int(actions[0]), int(actions[1])
	copy(e.history[1:], e.history[:Memory-1])
	e.history[0] = [2]byte{byte(a0 + 1), byte(a1 + 1)}
	rewards[0], rewards[1] = Payoff(a0, a1), Payoff(a1, a0)
	terminated[0], terminated[1] = false, false
	e.observe(obs)
}

// observe writes both agents' observations, each from its own side.
func (e *Env) observe(obs []float32) {
	clear(obs[:2*ObsDim])
	for p := range 2 {
		o := obs[p*ObsDim : (p+1)*ObsDim]
		for r, moves := range e.history {
			for side, who := range [2]int{p, 1 - p} {
				if m := moves[who]; m != 0 {
					o[side*2*Memory+r*2+int(m-1)] = 1
				}
			}
		}
	}
}

func (e *Env) ValidAction(a []float32) bool { return a[0] == Cooperate || a[0] == Defect }

func (e *Env) MarshalBinary() ([]byte, error) {
	out := make([]byte, 0, 2*Memory)
	for _, m := range e.history {
		out = append(out, m[0], m[1])
	}
	return out, nil
}

func (e *Env) UnmarshalBinary(b []byte) error {
	if len(b) != 2*Memory {
		return fmt.Errorf("ipd: state of %d bytes, want %d", len(b), 2*Memory)
	}
	for r := range e.history {
		if b[2*r] > 2 || b[2*r+1] > 2 {
			return fmt.Errorf("ipd: move %d/%d in the state is not a move", b[2*r], b[2*r+1])
		}
		e.history[r] = [2]byte{b[2*r], b[2*r+1]}
	}
	return nil
}

// LastMove is the other player's last move as agent p observes it in obs
// (one agent's slice), Cooperate before the first round: tit-for-tat's
// next move.
func LastMove(obs []float32) int {
	if obs[2*Memory+1] == 1 {
		return Defect
	}
	return Cooperate
}
