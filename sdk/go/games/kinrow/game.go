package kinrow

import (
	"errors"
	"fmt"
)

// StateVersion is the first byte of a saved state.
const StateVersion = 1

// stateHeader is version, family index, players.
const stateHeader = 3

// Game is one game in progress. The zero value is not usable; use New.
type Game struct {
	cfg    Config
	geo    *Geometry
	cells  []int8 // -1 empty, else the owner
	moves  int
	counts [MaxPlayers]int
	winner int // -1: none
}

// New starts an empty game of configuration c.
func New(c Config) (*Game, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	geo, err := GeometryOf(c.Board)
	if err != nil {
		return nil, err
	}
	g := &Game{cfg: c, geo: geo, cells: make([]int8, geo.Cells())}
	g.Reset()
	return g, nil
}

// MustNew is New for configurations known to be valid.
func MustNew(c Config) *Game {
	g, err := New(c)
	if err != nil {
		panic(err)
	}
	return g
}

// Config is the game's configuration.
func (g *Game) Config() Config { return g.cfg }

// Geometry is the game's board.
func (g *Game) Geometry() *Geometry { return g.geo }

// Reset empties the board; player 0 moves first. (The rules have no
// randomness, so a seed has nothing to choose.)
func (g *Game) Reset() {
	for i := range g.cells {
		g.cells[i] = -1
	}
	g.moves, g.counts, g.winner = 0, [MaxPlayers]int{}, -1
}

// Moves is the number of stones placed.
func (g *Game) Moves() int { return g.moves }

// Count is the number of stones player p has placed.
func (g *Game) Count(p int) int { return g.counts[p] }

// At is the owner of cell c, or -1 when it is empty.
func (g *Game) At(c int) int { return int(g.cells[c]) }

// Winner is the player who completed a line, or -1.
func (g *Game) Winner() int { return g.winner }

// Full reports whether every cell holds a stone.
func (g *Game) Full() bool { return g.moves == len(g.cells) }

// Terminal reports whether the game is over: a line or a full board.
func (g *Game) Terminal() bool { return g.winner >= 0 || g.Full() }

// ToMove is the player whose turn it is, or -1 when the game is over.
func (g *Game) ToMove() int {
	if g.Terminal() {
		return -1
	}
	return g.moves % g.cfg.Players
}

// Legal marks the empty cells in mask when it is player's turn, and clears
// mask otherwise.
func (g *Game) Legal(player int, mask []bool) {
	ok := player == g.ToMove()
	for c, o := range g.cells {
		mask[c] = ok && o < 0
	}
}

// Apply places player's stone on cell action.
func (g *Game) Apply(player, action int) error {
	switch {
	case g.Terminal():
		return errors.New("kinrow: the game is over")
	case player != g.ToMove():
		return fmt.Errorf("kinrow: player %d moved, it is player %d's turn", player, g.ToMove())
	case action < 0 || action >= len(g.cells):
		return fmt.Errorf("kinrow: cell %d outside [0,%d)", action, len(g.cells))
	case g.cells[action] >= 0:
		return fmt.Errorf("kinrow: cell %d is taken by player %d", action, g.cells[action])
	}
	g.cells[action] = int8(player)
	g.moves++
	g.counts[player]++
	if g.LongestRun(action, player) >= g.geo.K {
		g.winner = player
	}
	return nil
}

// Run is the length of p's run through cell c along axis a, counting c as
// p's whatever it holds, and how many of the run's two ends are open
// (empty cells).
func (g *Game) Run(c, a, p int) (length, open int) {
	length = 1
	na := len(g.geo.Axes)
	for side := 0; side < 2; side++ {
		n := int(g.geo.nb[(c*na+a)*2+side])
		for n >= 0 && int(g.cells[n]) == p {
			length++
			n = int(g.geo.nb[(n*na+a)*2+side])
		}
		if n >= 0 && g.cells[n] < 0 {
			open++
		}
	}
	return length, open
}

// LongestRun is the longest of p's runs through c over all axes (c counted
// as p's).
func (g *Game) LongestRun(c, p int) int {
	best := 0
	for a := range g.geo.Axes {
		if l, _ := g.Run(c, a, p); l > best {
			best = l
		}
	}
	return best
}

// Outcome writes per-player returns (+1 for the winner, -1 for everyone
// else; 0 for all on a draw or while the game goes on) and reports whether
// the game is over.
func (g *Game) Outcome(returns []float32) bool {
	for p := range returns {
		returns[p] = 0
		if g.winner >= 0 {
			returns[p] = -1
			if p == g.winner {
				returns[p] = 1
			}
		}
	}
	return g.Terminal()
}

// StateBytes is the size of a saved state for a configuration.
func StateBytes(c Config) int {
	geo, err := GeometryOf(c.Board)
	if err != nil {
		return 0
	}
	return stateHeader + geo.Cells()
}

// Save appends the state: version, family index, players, then one byte
// per cell (0 empty, else owner+1). Move count, turn and winner follow
// from the cells.
func (g *Game) Save(buf []byte) []byte {
	fi := 0
	for i, f := range Families {
		if f == g.cfg.Board {
			fi = i
		}
	}
	buf = append(buf, StateVersion, byte(fi), byte(g.cfg.Players))
	for _, o := range g.cells {
		buf = append(buf, byte(o+1))
	}
	return buf
}

// ConfigOfState reads the configuration from a saved state's header.
func ConfigOfState(state []byte) (Config, error) {
	if len(state) < stateHeader || state[0] != StateVersion || int(state[1]) >= len(Families) {
		return Config{}, errors.New("kinrow: state: bad header")
	}
	c := Config{Families[state[1]], int(state[2])}
	return c, c.Validate()
}

// FromState builds a game from a saved state of any configuration.
func FromState(state []byte) (*Game, error) {
	c, err := ConfigOfState(state)
	if err != nil {
		return nil, err
	}
	g, err := New(c)
	if err != nil {
		return nil, err
	}
	return g, g.Restore(state)
}

// Restore replaces the state with one from Save of the same configuration.
// It rejects states no legal play reaches: wrong stone counts for the turn
// order, or a line by anyone other than the last mover.
func (g *Game) Restore(state []byte) error {
	c, err := ConfigOfState(state)
	if err != nil {
		return err
	}
	if c != g.cfg {
		return fmt.Errorf("kinrow: state is %s, game is %s", c, g.cfg)
	}
	if len(state) != stateHeader+len(g.cells) {
		return fmt.Errorf("kinrow: state has %d bytes, want %d", len(state), stateHeader+len(g.cells))
	}
	var counts [MaxPlayers]int
	moves := 0
	for _, b := range state[stateHeader:] {
		if int(b) > c.Players {
			return fmt.Errorf("kinrow: state: cell value %d, want 0-%d", b, c.Players)
		}
		if b > 0 {
			counts[b-1]++
			moves++
		}
	}
	n := c.Players
	for p := 0; p < n; p++ {
		if want := moves / n; counts[p] != want+btoi(p < moves%n) {
			return fmt.Errorf("kinrow: state: player %d has %d stones after %d moves", p, counts[p], moves)
		}
	}
	for i, b := range state[stateHeader:] {
		g.cells[i] = int8(b) - 1
	}
	g.moves, g.counts, g.winner = moves, counts, -1
	last := (moves + n - 1) % n
	for cell, o := range g.cells {
		if o < 0 || g.LongestRun(cell, int(o)) < g.geo.K {
			continue
		}
		if int(o) != last {
			g.Reset()
			return fmt.Errorf("kinrow: state: player %d has a line but player %d moved last", o, last)
		}
		g.winner = last
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ObsDim is the observation size: Players+1 planes of Cells values.
func ObsDim(c Config) int {
	geo, err := GeometryOf(c.Board)
	if err != nil {
		return 0
	}
	return (c.Players + 1) * geo.Cells()
}

// Observe writes player's view: plane i (i < Players) marks the stones of
// player (player+i) mod Players, so plane 0 is always the viewer's own and
// the opponents follow in turn order; the last plane marks empty cells.
func (g *Game) Observe(player int, obs []float32) {
	nc, n := len(g.cells), g.cfg.Players
	clear(obs[:(n+1)*nc])
	empty := obs[n*nc : (n+1)*nc]
	for c, o := range g.cells {
		if o < 0 {
			empty[c] = 1
			continue
		}
		rel := (int(o) - player + n) % n
		obs[rel*nc+c] = 1
	}
}
