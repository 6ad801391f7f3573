// Package catalog lists the seed's game configs: its four board families
// (docs/games.md) × 2, 3 and 4 players, with each board's cell count and
// the seed's board-to-GPU matching (least VRAM, recommended tier).
package catalog

import "fmt"

// Board is one board family.
type Board struct {
	Name   string `json:"board"`
	Cells  int    `json:"cells"`
	MinGB  int    `json:"min_vram_gb"`
	Tier   string `json:"tier" doc:"The seed's recommended GPU tier."`
	Layout string `json:"layout"`
}

// Boards are the seed's board families, smallest first.
var Boards = []Board{
	{"hex8", 61, 8, "Tier 3", "hexagonal board of side 5"},
	{"square8", 64, 8, "Tier 3", "8×8 square board"},
	{"square19", 361, 16, "Tier 2-3", "19×19 square board"},
	{"hexagonal", 469, 32, "Tier 1-2", "hexagonal board of side 13"},
}

// Players are the player counts every board is played with.
var Players = []int{2, 3, 4}

// Entry is one game config.
type Entry struct {
	Board
	Config  string `json:"config" example:"square8_2p"`
	Players int    `json:"players"`
}

// Configs lists every board × player count, in board then player order.
func Configs() []Entry {
	var out []Entry
	for _, b := range Boards {
		for _, p := range Players {
			out = append(out, Entry{Board: b, Config: fmt.Sprintf("%s_%dp", b.Name, p), Players: p})
		}
	}
	return out
}
