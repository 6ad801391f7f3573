package schedule

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// boardVRAMGB is the seed's board-to-GPU matching: the least VRAM a board
// family's self-play wants.
var boardVRAMGB = map[string]int{"hex8": 8, "square8": 8, "square19": 16, "hexagonal": 32}

// MinVRAMMB is the VRAM config (board_Np) needs; false for an unknown
// board.
func MinVRAMMB(config string) (int, bool) {
	board, _, _ := strings.Cut(config, "_")
	gb, ok := boardVRAMGB[board]
	return gb * 1024, ok
}

// MatchConfig picks self-play for an idle GPU with vramMB of memory: the
// config with the largest board that fits (big GPUs get big boards, the
// seed's tiers), ties by name; "" when none fits. Unknown boards fit any
// GPU and rank last.
func MatchConfig(vramMB int, configs []string) string {
	best, bestNeed := "", -1
	for _, c := range configs {
		need, ok := MinVRAMMB(c)
		if !ok {
			need = 0
		}
		if need > vramMB {
			continue
		}
		if need > bestNeed || (need == bestNeed && c < best) {
			best, bestNeed = c, need
		}
	}
	return best
}

// GPUSlot is one GPU of a cluster as the idle daemon sees it.
type GPUSlot struct {
	Node   string `json:"node"`
	Index  int    `json:"index"`
	Model  string `json:"model,omitempty"`
	VRAMMB int    `json:"vram_mb"`
	// Busy: allocated to a job, or utilised by something else.
	Busy bool `json:"busy"`
}

// Key names the slot.
func (g GPUSlot) Key() string { return fmt.Sprintf("%s/%d", g.Node, g.Index) }

// IdleSince remembers since when each GPU has been idle.
type IdleSince map[string]time.Time

// Update starts the clock of GPUs that became idle and forgets busy or
// vanished ones.
func (s IdleSince) Update(slots []GPUSlot, now time.Time) {
	seen := map[string]bool{}
	for _, g := range slots {
		k := g.Key()
		seen[k] = true
		switch {
		case g.Busy:
			delete(s, k)
		case s[k].IsZero():
			s[k] = now
		}
	}
	for k := range s {
		if !seen[k] {
			delete(s, k)
		}
	}
}

// Idle lists the GPUs idle for at least threshold, in key order.
func (s IdleSince) Idle(slots []GPUSlot, now time.Time, threshold time.Duration) []GPUSlot {
	var out []GPUSlot
	for _, g := range slots {
		if t, ok := s[g.Key()]; ok && !g.Busy && now.Sub(t) >= threshold {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}
