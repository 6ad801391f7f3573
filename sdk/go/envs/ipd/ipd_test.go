package ipd

import (
	"slices"
	"testing"
)

func TestPayoffsAndObservations(t *testing.T) {
	var e Env
	obs := make([]float32, 2*ObsDim)
	rew := make([]float32, 2)
	term := make([]bool, 2)
	e.Reset(obs)
	if slices.ContainsFunc(obs, func(x float32) bool { return x != 0 }) {
		t.Fatalf("first observation %v, want zeros", obs)
	}
	for _, tc := range []struct {
		a0, a1 int
		r0, r1 float32
	}{{Cooperate, Cooperate, R, R}, {Cooperate, Defect, S, T}, {Defect, Cooperate, T, S}, {Defect, Defect, P, P}} {
		e.Step([]float32{float32(tc.a0), float32(tc.a1)}, obs, rew, term)
		if rew[0] != tc.r0 || rew[1] != tc.r1 || term[0] || term[1] {
			t.Fatalf("moves %d,%d paid %v (terminated %v), want %v,%v", tc.a0, tc.a1, rew, term, tc.r0, tc.r1)
		}
		// Each agent sees the other's last move in its own "theirs" half:
		// tit-for-tat copies it.
		if LastMove(obs[:ObsDim]) != tc.a1 || LastMove(obs[ObsDim:]) != tc.a0 {
			t.Fatalf("after %d,%d the agents read the other's last move as %d,%d", tc.a0, tc.a1, LastMove(obs[:ObsDim]), LastMove(obs[ObsDim:]))
		}
	}
	st, _ := e.MarshalBinary()
	var f Env
	if err := f.UnmarshalBinary(st); err != nil || f != e {
		t.Fatalf("state does not round-trip: %v", err)
	}
	if err := f.UnmarshalBinary([]byte{9, 9, 9, 9}); err == nil {
		t.Error("a state with no moves in it was accepted")
	}
}
