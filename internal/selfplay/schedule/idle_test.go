package schedule

import (
	"testing"
	"time"
)

func TestMatchConfig(t *testing.T) {
	all := []string{"hex8_2p", "square8_2p", "square19_3p", "hexagonal_4p"}
	for _, tc := range []struct {
		vramMB int
		want   string
	}{
		{6 * 1024, ""},
		{8 * 1024, "hex8_2p"}, // hex8 and square8 tie: by name
		{12 * 1024, "hex8_2p"},
		{16 * 1024, "square19_3p"},
		{24 * 1024, "square19_3p"},
		{80 * 1024, "hexagonal_4p"},
	} {
		if got := MatchConfig(tc.vramMB, all); got != tc.want {
			t.Errorf("%d MB: %q, want %q", tc.vramMB, got, tc.want)
		}
	}
	if got := MatchConfig(80*1024, []string{"square8_2p"}); got != "square8_2p" {
		t.Errorf("only a small board: %q", got)
	}
	if got := MatchConfig(4*1024, []string{"tictactoe"}); got != "tictactoe" {
		t.Errorf("unknown board: %q", got)
	}
}

func TestIdleSince(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := GPUSlot{Node: "n1", Index: 0, VRAMMB: 12288}
	b := GPUSlot{Node: "n2", Index: 0, VRAMMB: 81920}
	s := IdleSince{}
	s.Update([]GPUSlot{a, b}, t0)
	if got := s.Idle([]GPUSlot{a, b}, t0.Add(9*time.Minute), 10*time.Minute); len(got) != 0 {
		t.Fatalf("idle after 9 min: %v", got)
	}
	busy := b
	busy.Busy = true
	s.Update([]GPUSlot{a, busy}, t0.Add(5*time.Minute)) // b gets work: its clock stops
	s.Update([]GPUSlot{a, b}, t0.Add(6*time.Minute))    // and restarts when it is free again
	got := s.Idle([]GPUSlot{a, b}, t0.Add(10*time.Minute), 10*time.Minute)
	if len(got) != 1 || got[0].Key() != "n1/0" {
		t.Fatalf("idle ≥ 10 min at t+10m: %v, want n1/0 only", got)
	}
	if got := s.Idle([]GPUSlot{a, b}, t0.Add(16*time.Minute), 10*time.Minute); len(got) != 2 {
		t.Fatalf("idle at t+16m: %v", got)
	}
	s.Update([]GPUSlot{a}, t0.Add(17*time.Minute)) // b's node left
	if _, ok := s["n2/0"]; ok {
		t.Fatal("a vanished GPU is still tracked")
	}
}
