// Package spread is a cooperative landmark-covering game on a grid, in the
// spirit of PettingZoo MPE's simple_spread, as a multi-agent game
// (sdk/go/envs/multiagent): Agents agents and as many landmarks on a
// Size×Size grid, placed at random each episode; every step each agent
// stays or moves one cell, and every agent is paid the same reward, minus
// the sum over landmarks of the distance (Manhattan, in cells) to the
// nearest agent, divided by the number of landmarks. Episodes are
// truncated after Steps steps.
//
// An agent observes (all positions divided by Size−1):
//
//	[0, Agents)          its id, one-hot
//	[Agents, +2)         its own x, y
//	then 2 per landmark  the landmark's x, y relative to it (landmarks in
//	                     cell order, so the same layout reads the same)
//	then 2 per other     the other agents' x, y relative to it, in id order
//	last Moves values    its action mask: 1 where the move stays on the
//	                     grid (envs.Spec.ActionMask); a masked move stays
//
// Scripted (NearestUnclaimed) is the baseline a learned policy is scored
// against: agents in id order each claim the nearest landmark no lower id
// claimed and walk to it.
package spread

import (
	"encoding/binary"
	"fmt"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

const (
	Name   = "LandmarkSpread-v0"
	Size   = 5
	Agents = 3
	Steps  = 25
	// Moves are the actions: stay, up, down, left, right.
	Moves = 5

	// ObsDim is one agent's observation width.
	ObsDim = Agents + 2 + 2*Agents + 2*(Agents-1) + Moves
	maskAt = ObsDim - Moves
)

// Stay, Up, Down, Left and Right are the actions.
const (
	Stay = iota
	Up
	Down
	Left
	Right
)

var moves = [Moves][2]int{{0, 0}, {0, -1}, {0, 1}, {-1, 0}, {1, 0}}

// AgentNames are the agents.
var AgentNames = []string{"agent_0", "agent_1", "agent_2"}

// Spec is the game's env spec.
func Spec() envs.Spec {
	low, high := make([]float32, ObsDim), make([]float32, ObsDim)
	for i := range high {
		low[i], high[i] = -1, 1
	}
	for i := range Agents + 2 {
		low[i] = 0
	}
	for i := maskAt; i < ObsDim; i++ {
		low[i] = 0
	}
	return envs.Spec{
		Name:            Name,
		Observation:     envs.Space{Kind: envs.Box, Shape: []int{ObsDim}, Low: low, High: high},
		Action:          envs.Space{Kind: envs.Discrete, N: Moves},
		MaxEpisodeSteps: Steps,
		Agents:          append([]string(nil), AgentNames...),
		ActionMask:      true,
	}
}

type cell struct{ x, y int8 }

func (c cell) dist(o cell) int { return abs(int(c.x)-int(o.x)) + abs(int(c.y)-int(o.y)) }

func (c cell) move(a int) cell {
	n := cell{c.x + int8(moves[a][0]), c.y + int8(moves[a][1])}
	if n.x < 0 || n.y < 0 || n.x >= Size || n.y >= Size {
		return c
	}
	return n
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Env is one game.
type Env struct {
	rng       uint64 // splitmix64 state
	agents    [Agents]cell
	landmarks [Agents]cell // in cell order
}

func (e *Env) Seed(seed uint64) { e.rng = seed }

func (e *Env) next() uint64 {
	e.rng += 0x9E3779B97F4A7C15
	z := e.rng
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Reset places the landmarks on distinct cells and the agents on distinct
// cells (an agent may start on a landmark).
func (e *Env) Reset(obs []float32) {
	var taken [Size * Size]bool
	for i := range e.landmarks {
		e.landmarks[i] = e.freeCell(&taken)
	}
	// Cell order: the observation's layout does not depend on draw order.
	for i := 1; i < Agents; i++ {
		for j := i; j > 0 && index(e.landmarks[j]) < index(e.landmarks[j-1]); j-- {
			e.landmarks[j], e.landmarks[j-1] = e.landmarks[j-1], e.landmarks[j]
		}
	}
	taken = [Size * Size]bool{}
	for i := range e.agents {
		e.agents[i] = e.freeCell(&taken)
	}
	e.observe(obs)
}

func index(c cell) int { return int(c.y)*Size + int(c.x) }

func (e *Env) freeCell(taken *[Size * Size]bool) cell {
	for {
		k := int(e.next() % (Size * Size))
		if !taken[k] {
			taken[k] = true
			return cell{int8(k % Size), int8(k / Size)}
		}
	}
}

func (e *Env) Step(actions, obs, rewards []float32, terminated []bool) {
	for i := range e.agents {
		e.agents[i] = e.agents[i].move(int(actions[i]))
	}
	r := e.Reward()
	for i := range Agents {
		rewards[i], terminated[i] = r, false
	}
	e.observe(obs)
}

// Reward is the step's shared reward: minus the mean over landmarks of the
// distance to the nearest agent (0 when every landmark is covered).
func (e *Env) Reward() float32 {
	sum := 0
	for _, l := range e.landmarks {
		d := 2 * Size
		for _, a := range e.agents {
			d = min(d, a.dist(l))
		}
		sum += d
	}
	return -float32(sum) / Agents
}

func (e *Env) observe(obs []float32) {
	const scale = 1.0 / (Size - 1)
	for i, me := range e.agents {
		o := obs[i*ObsDim : (i+1)*ObsDim]
		clear(o)
		o[i] = 1
		o[Agents], o[Agents+1] = float32(me.x)*scale, float32(me.y)*scale
		k := Agents + 2
		for _, l := range e.landmarks {
			o[k], o[k+1] = float32(l.x-me.x)*scale, float32(l.y-me.y)*scale
			k += 2
		}
		for j, a := range e.agents {
			if j != i {
				o[k], o[k+1] = float32(a.x-me.x)*scale, float32(a.y-me.y)*scale
				k += 2
			}
		}
		for a := range Moves {
			if a == Stay || me.move(a) != me {
				o[maskAt+a] = 1
			}
		}
	}
}

func (e *Env) ValidAction(a []float32) bool {
	return a[0] >= 0 && a[0] < Moves && a[0] == float32(int(a[0]))
}

func (e *Env) MarshalBinary() ([]byte, error) {
	out := binary.LittleEndian.AppendUint64(nil, e.rng)
	for _, c := range append(e.agents[:], e.landmarks[:]...) {
		out = append(out, byte(c.x), byte(c.y))
	}
	return out, nil
}

func (e *Env) UnmarshalBinary(b []byte) error {
	if len(b) != 8+4*Agents {
		return fmt.Errorf("spread: state of %d bytes, want %d", len(b), 8+4*Agents)
	}
	var cs [2 * Agents]cell
	for i := range cs {
		x, y := int8(b[8+2*i]), int8(b[9+2*i])
		if x < 0 || y < 0 || x >= Size || y >= Size {
			return fmt.Errorf("spread: cell (%d, %d) in the state is off the grid", x, y)
		}
		cs[i] = cell{x, y}
	}
	e.rng = binary.LittleEndian.Uint64(b)
	copy(e.agents[:], cs[:Agents])
	copy(e.landmarks[:], cs[Agents:])
	return nil
}

// NearestUnclaimed is the scripted baseline's action for the agent whose
// observation obs is (one agent's slice): agents in id order each claim
// the nearest landmark no lower id claimed (ties: the first in cell
// order), and each walks to its own along the longer axis first.
func NearestUnclaimed(obs []float32) int {
	me := -1
	for i := range Agents {
		if obs[i] == 1 {
			me = i
		}
	}
	if me < 0 {
		return Stay
	}
	const cells = Size - 1
	at := func(k int) cell { return cell{int8(roundCell(obs[k] * cells)), int8(roundCell(obs[k+1] * cells))} }
	self := at(Agents)
	rel := func(k int) cell { r := at(k); return cell{self.x + r.x, self.y + r.y} }
	var landmarks [Agents]cell
	for l := range landmarks {
		landmarks[l] = rel(Agents + 2 + 2*l)
	}
	var agents [Agents]cell
	k := Agents + 2 + 2*Agents
	for j := range agents {
		if j == me {
			agents[j] = self
			continue
		}
		agents[j] = rel(k)
		k += 2
	}
	var claimed [Agents]bool
	target := -1
	for j := 0; j <= me; j++ {
		best := -1
		for l, lm := range landmarks {
			if !claimed[l] && (best < 0 || agents[j].dist(lm) < agents[j].dist(landmarks[best])) {
				best = l
			}
		}
		claimed[best] = true
		target = best
	}
	dx, dy := int(landmarks[target].x-self.x), int(landmarks[target].y-self.y)
	switch {
	case dx == 0 && dy == 0:
		return Stay
	case abs(dx) >= abs(dy) && dx > 0:
		return Right
	case abs(dx) >= abs(dy):
		return Left
	case dy > 0:
		return Down
	default:
		return Up
	}
}

func roundCell(v float32) int {
	if v < 0 {
		return -int(-v + 0.5)
	}
	return int(v + 0.5)
}
