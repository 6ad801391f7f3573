// Package selfplay holds what the self-play engines, the quality gate, the
// NPZ export and the pipeline share: the record of one played game.
package selfplay

// Game is one self-play (or evaluation) game as an engine recorded it.
type Game struct {
	Config   string    `json:"config"`          // e.g. "square8_2p"
	Engine   string    `json:"engine"`          // "mcts", "heuristic" or "random"
	Model    string    `json:"model,omitempty"` // model that guided MCTS; empty: random rollouts
	Seed     uint64    `json:"seed"`
	Players  int       `json:"players"`
	Moves    []Move    `json:"moves"`
	Outcome  []float32 `json:"outcome"`  // per player, as the plugin's Outcome reports: +1 win, -1 loss, 0 draw
	Terminal bool      `json:"terminal"` // false: stopped at the length cap without an end
	Illegal  int       `json:"illegal"`  // moves the plugin refused; the quality gate rejects games with any
}

// Move is one move with what training needs from it.
type Move struct {
	Player int       `json:"p"`
	Action int       `json:"a"`
	State  []float32 `json:"s"`  // the plugin's Observe for Player before the move
	Policy []float32 `json:"pi"` // visit-count distribution over the action space (one-hot for engines without search)
}
