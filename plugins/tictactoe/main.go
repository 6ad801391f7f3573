// Command tictactoe is a two-player game plugin: the smallest complete user
// of the game ABI (players to move, legal mask, apply, outcome, save/restore,
// per-player observation). Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"errors"
	"fmt"

	"github.com/trainyard/trainyard/sdk/go/plugin"
)

func init() {
	plugin.RegisterGame(Meta, func() plugin.Game { return &Board{} })
}

func main() {}

// Meta declares the game: 9 cells, observations are the player's own stones
// then the opponent's (2×9 values in {0,1}).
var Meta = plugin.Metadata{
	Name:        "tictactoe",
	Version:     "1.0.0",
	Description: "Tic-tac-toe; player 0 moves first; returns +1 win, -1 loss, 0 draw.",
	Observation: plugin.Space{Kind: "box", Shape: []int{2, 9}, Low: make([]float32, 18), High: ones(18)},
	Action:      plugin.Space{Kind: "discrete", N: 9},
	NumPlayers:  2,
	StateBytes:  10,
}

func ones(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

// Board is one game: cells hold 0 (empty) or player+1; turn is whose move.
type Board struct {
	cells [9]byte
	turn  byte
}

var lines = [8][3]int{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {0, 3, 6}, {1, 4, 7}, {2, 5, 8}, {0, 4, 8}, {2, 4, 6}}

// winner returns 1 or 2 for a winner, 0 for none.
func (b *Board) winner() byte {
	for _, l := range lines {
		if c := b.cells[l[0]]; c != 0 && c == b.cells[l[1]] && c == b.cells[l[2]] {
			return c
		}
	}
	return 0
}

func (b *Board) full() bool {
	for _, c := range b.cells {
		if c == 0 {
			return false
		}
	}
	return true
}

func (b *Board) over() bool { return b.winner() != 0 || b.full() }

func (b *Board) Reset(seed uint64) { *b = Board{} }

func (b *Board) ToMove(players []int32) []int32 {
	if b.over() {
		return players
	}
	return append(players, int32(b.turn))
}

func (b *Board) Legal(player int, mask []bool) {
	if b.over() || player != int(b.turn) {
		return
	}
	for i, c := range b.cells {
		mask[i] = c == 0
	}
}

func (b *Board) Apply(player, action int) error {
	switch {
	case b.over():
		return errors.New("game is over")
	case player != int(b.turn):
		return fmt.Errorf("player %d moved out of turn", player)
	case b.cells[action] != 0:
		return fmt.Errorf("cell %d is taken", action)
	}
	b.cells[action] = byte(player) + 1
	b.turn = 1 - b.turn
	return nil
}

func (b *Board) Outcome(returns []float32) bool {
	returns[0], returns[1] = 0, 0
	switch b.winner() {
	case 1:
		returns[0], returns[1] = 1, -1
	case 2:
		returns[0], returns[1] = -1, 1
	}
	return b.over()
}

func (b *Board) Save(buf []byte) []byte { return append(append(buf, b.cells[:]...), b.turn) }

func (b *Board) Restore(state []byte) error {
	if len(state) != 10 || state[9] > 1 {
		return fmt.Errorf("state has %d bytes, want 10 with turn 0 or 1", len(state))
	}
	for _, c := range state[:9] {
		if c > 2 {
			return fmt.Errorf("cell value %d, want 0-2", c)
		}
	}
	copy(b.cells[:], state)
	b.turn = state[9]
	return nil
}

func (b *Board) Observe(player int, obs []float32) {
	for i, c := range b.cells {
		own, opp := float32(0), float32(0)
		if c == byte(player)+1 {
			own = 1
		} else if c != 0 {
			opp = 1
		}
		obs[i], obs[9+i] = own, opp
	}
}
