package npz

import (
	"bytes"
	"fmt"

	"github.com/trainyard/trainyard/internal/selfplay"
)

// The arrays of a self-play export (docs/selfplay.md). N is the number of
// positions (one per recorded move), OBS the observation shape, A the
// action count.
const (
	ArrayStates = "states"  // float32 (N, OBS...): the plugin's observation for the player to move
	ArrayPolicy = "policy"  // float32 (N, A): the search's visit distribution (sums to 1)
	ArrayValue  = "value"   // float32 (N,): the game's outcome for the player to move, in [-1, 1]
	ArrayToMove = "to_move" // int8 (N,): the seat that moved, 0-based
)

// Dataset is a self-play export in memory: flat, C order.
type Dataset struct {
	ObsShape []int // shape of one state; [D] when unknown
	Actions  int
	States   []float32
	Policy   []float32
	Value    []float32
	ToMove   []int8
}

// Len is the number of positions.
func (d Dataset) Len() int { return len(d.Value) }

// FromGames turns finished games into training positions: every move's
// state and policy, valued by the game's outcome for its mover. obsShape
// may be nil (flat states).
func FromGames(games []selfplay.Game, obsShape []int) (Dataset, error) {
	d := Dataset{ObsShape: obsShape}
	dim := -1
	for gi, g := range games {
		for mi, m := range g.Moves {
			if dim < 0 {
				dim, d.Actions = len(m.State), len(m.Policy)
			}
			if len(m.State) != dim || len(m.Policy) != d.Actions {
				return d, fmt.Errorf("game %d move %d: state %d / policy %d values, earlier moves had %d / %d", gi, mi, len(m.State), len(m.Policy), dim, d.Actions)
			}
			if m.Player < 0 || m.Player >= len(g.Outcome) || m.Player > 127 {
				return d, fmt.Errorf("game %d move %d: player %d outside the outcome's %d seats", gi, mi, m.Player, len(g.Outcome))
			}
			d.States = append(d.States, m.State...)
			d.Policy = append(d.Policy, m.Policy...)
			d.Value = append(d.Value, g.Outcome[m.Player])
			d.ToMove = append(d.ToMove, int8(m.Player))
		}
	}
	if dim < 0 {
		return d, fmt.Errorf("no positions: %d games without moves", len(games))
	}
	if d.ObsShape == nil {
		d.ObsShape = []int{dim}
	}
	if n, err := elements(d.ObsShape); err != nil || n != dim {
		return d, fmt.Errorf("observation shape %v does not hold the %d values of a state", d.ObsShape, dim)
	}
	return d, nil
}

// Arrays are the dataset's named arrays.
func (d Dataset) Arrays() []Array {
	n := d.Len()
	return []Array{
		F32(ArrayStates, append([]int{n}, d.ObsShape...), d.States),
		F32(ArrayPolicy, []int{n, d.Actions}, d.Policy),
		F32(ArrayValue, []int{n}, d.Value),
		I8(ArrayToMove, []int{n}, d.ToMove),
	}
}

// Encode is the dataset as .npz bytes.
func (d Dataset) Encode() ([]byte, error) {
	var buf bytes.Buffer
	if err := Write(&buf, d.Arrays()...); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Decode reads a self-play export written by Encode (or by NumPy with the
// same names, shapes and dtypes).
func Decode(b []byte) (Dataset, error) {
	arrs, err := Read(b)
	if err != nil {
		return Dataset{}, err
	}
	get := func(name, dtype string, rank int) (Array, error) {
		a, ok := arrs[name]
		switch {
		case !ok:
			return a, fmt.Errorf("npz: no array %q", name)
		case a.Dtype != dtype:
			return a, fmt.Errorf("npz: array %s has dtype %s, want %s", name, a.Dtype, dtype)
		case rank > 0 && len(a.Shape) != rank, rank < 0 && len(a.Shape) < 2:
			return a, fmt.Errorf("npz: array %s has shape %v", name, a.Shape)
		}
		return a, nil
	}
	st, err := get(ArrayStates, Float32, -1)
	if err != nil {
		return Dataset{}, err
	}
	pol, err := get(ArrayPolicy, Float32, 2)
	if err != nil {
		return Dataset{}, err
	}
	val, err := get(ArrayValue, Float32, 1)
	if err != nil {
		return Dataset{}, err
	}
	tm, err := get(ArrayToMove, Int8, 1)
	if err != nil {
		return Dataset{}, err
	}
	n := val.Shape[0]
	if st.Shape[0] != n || pol.Shape[0] != n || tm.Shape[0] != n {
		return Dataset{}, fmt.Errorf("npz: arrays disagree on N: states %v, policy %v, value %v, to_move %v", st.Shape, pol.Shape, val.Shape, tm.Shape)
	}
	d := Dataset{ObsShape: st.Shape[1:], Actions: pol.Shape[1]}
	d.States, _ = st.Float32s()
	d.Policy, _ = pol.Float32s()
	d.Value, _ = val.Float32s()
	d.ToMove, _ = tm.Int8s()
	return d, nil
}
