// Package kinrow is the rules of k-in-a-row, the game Trainyard's self-play
// pipeline trains on: players take turns placing one stone on an empty
// cell of a square or hexagonal board; the first to own k cells in a row
// along one of the board's axes wins; a full board without a line is a
// draw. The rules are written once here, in plain Go with no WASM
// dependencies: the game plugin (plugins/kinrow) wraps them
// through the Go guest SDK, and the self-play heuristic reads the same
// board. docs/games.md documents rules, coordinates and encodings.
package kinrow

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Board families, as the seed names them.
const (
	Square8   = "square8"   // 8×8 square grid, 64 cells, 5 in a row
	Square19  = "square19"  // 19×19 square grid, 361 cells, 5 in a row
	Hex8      = "hex8"      // hexagon of side 5, 61 cells, 5 in a row
	Hexagonal = "hexagonal" // hexagon of side 13, 469 cells, 5 in a row
)

// Families lists the board families in a fixed order.
var Families = []string{Hex8, Square8, Square19, Hexagonal}

// MinPlayers and MaxPlayers bound the player count.
const (
	MinPlayers = 2
	MaxPlayers = 4
)

// Config is one playable configuration: a board family and a player count,
// named like the seed's configs ("square8_2p", "hexagonal_4p").
type Config struct {
	Board   string
	Players int
}

// String is the config name, e.g. "square8_2p".
func (c Config) String() string { return c.Board + "_" + strconv.Itoa(c.Players) + "p" }

// ParseConfig reads a config name such as "hex8_3p".
func ParseConfig(name string) (Config, error) {
	i := strings.LastIndexByte(name, '_')
	if i < 0 || !strings.HasSuffix(name, "p") {
		return Config{}, fmt.Errorf("kinrow: config %q: want <board>_<players>p, e.g. square8_2p", name)
	}
	n, err := strconv.Atoi(name[i+1 : len(name)-1])
	if err != nil {
		return Config{}, fmt.Errorf("kinrow: config %q: players: %w", name, err)
	}
	c := Config{Board: name[:i], Players: n}
	return c, c.Validate()
}

// Validate checks the board family and the player count.
func (c Config) Validate() error {
	if _, ok := specs[c.Board]; !ok {
		return fmt.Errorf("kinrow: board %q: want one of %v", c.Board, Families)
	}
	if c.Players < MinPlayers || c.Players > MaxPlayers {
		return fmt.Errorf("kinrow: %d players: want %d-%d", c.Players, MinPlayers, MaxPlayers)
	}
	return nil
}

// Configs lists every configuration: each family with 2, 3 and 4 players.
func Configs() []Config {
	var cs []Config
	for _, f := range Families {
		for p := MinPlayers; p <= MaxPlayers; p++ {
			cs = append(cs, Config{f, p})
		}
	}
	return cs
}

type spec struct {
	hex  bool
	size int // side length (square: cells per side; hex: cells per edge)
	k    int
}

var specs = map[string]spec{
	Square8:   {false, 8, 5},
	Square19:  {false, 19, 5},
	Hex8:      {true, 5, 5},
	Hexagonal: {true, 13, 5},
}

// Geometry is a board's cells and lines; shared and read-only.
type Geometry struct {
	Family string
	Hex    bool
	Size   int // square: width; hex: side length
	K      int // stones in a row that win
	// Coords[c] is cell c's coordinate: (x, y) on square boards with cell
	// = y·Size + x; axial (q, r) on hex boards, cells ordered by r then q.
	Coords [][2]int
	// Axes are the line directions: 4 on square boards (→, ↓, ↘, ↗), 3 on
	// hex boards (q, r and the third axial axis).
	Axes [][2]int
	// nb[(c·len(Axes)+a)·2+side] is the neighbour of c along axis a in the
	// positive (side 0) or negative (side 1) direction, or -1 off the board.
	nb []int32
}

// Cells is the number of cells, which is also the action space.
func (g *Geometry) Cells() int { return len(g.Coords) }

// Neighbor is the cell next to c along axis a (positive direction when
// forward), or -1 off the board.
func (g *Geometry) Neighbor(c, a int, forward bool) int {
	side := 1
	if forward {
		side = 0
	}
	return int(g.nb[(c*len(g.Axes)+a)*2+side])
}

// Cell is the cell at a coordinate, or -1 when it is off the board.
func (g *Geometry) Cell(x, y int) int {
	if !g.Hex {
		if x < 0 || y < 0 || x >= g.Size || y >= g.Size {
			return -1
		}
		return y*g.Size + x
	}
	s := g.Size - 1
	if x < -s || x > s || y < -s || y > s || x+y < -s || x+y > s {
		return -1
	}
	// Rows r = -s..s hold 2s+1-|r| cells starting at q = max(-s, -s-r).
	c := 0
	for r := -s; r < y; r++ {
		c += 2*s + 1 - abs(r)
	}
	return c + x - max(-s, -s-y)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

var (
	geoMu sync.Mutex
	geos  = map[string]*Geometry{}
)

// GeometryOf returns the (cached) geometry of a board family.
func GeometryOf(family string) (*Geometry, error) {
	sp, ok := specs[family]
	if !ok {
		return nil, fmt.Errorf("kinrow: board %q: want one of %v", family, Families)
	}
	geoMu.Lock()
	defer geoMu.Unlock()
	if g := geos[family]; g != nil {
		return g, nil
	}
	g := &Geometry{Family: family, Hex: sp.hex, Size: sp.size, K: sp.k}
	if sp.hex {
		s := sp.size - 1
		g.Axes = [][2]int{{1, 0}, {0, 1}, {1, -1}}
		for r := -s; r <= s; r++ {
			for q := max(-s, -s-r); q <= min(s, s-r); q++ {
				g.Coords = append(g.Coords, [2]int{q, r})
			}
		}
	} else {
		g.Axes = [][2]int{{1, 0}, {0, 1}, {1, 1}, {1, -1}}
		for y := 0; y < sp.size; y++ {
			for x := 0; x < sp.size; x++ {
				g.Coords = append(g.Coords, [2]int{x, y})
			}
		}
	}
	na := len(g.Axes)
	g.nb = make([]int32, len(g.Coords)*na*2)
	for c, xy := range g.Coords {
		for a, d := range g.Axes {
			g.nb[(c*na+a)*2] = int32(g.Cell(xy[0]+d[0], xy[1]+d[1]))
			g.nb[(c*na+a)*2+1] = int32(g.Cell(xy[0]-d[0], xy[1]-d[1]))
		}
	}
	geos[family] = g
	return g, nil
}
