// Package kinrowplugin wraps the k-in-a-row rules (sdk/go/games/kinrow)
// as a game plugin through the Go guest SDK. Plugin metadata is static per
// module and the ABI has no configuration call, so each configuration is
// its own module: plugins/kinrow/<config> (e.g. square8_2p) is a
// two-line main package calling Register. Nothing is passed at build time,
// so `trainyard plugin build ./plugins/kinrow/square8_2p` and the
// tests' plugintest.BuildGo need no flags.
package kinrowplugin

import (
	"github.com/trainyard/trainyard/sdk/go/games/kinrow"
	"github.com/trainyard/trainyard/sdk/go/plugin"
)

// Version of the plugin; bump when rules or encodings change.
const Version = "1.0.0"

// Name is the plugin name of a configuration, e.g. "kinrow-square8_2p".
func Name(c kinrow.Config) string { return "kinrow-" + c.String() }

// Meta declares configuration c.
func Meta(c kinrow.Config) plugin.Metadata {
	geo, err := kinrow.GeometryOf(c.Board)
	if err != nil {
		panic(err)
	}
	n := kinrow.ObsDim(c)
	high := make([]float32, n)
	for i := range high {
		high[i] = 1
	}
	return plugin.Metadata{
		Name:    Name(c),
		Version: Version,
		Description: "k-in-a-row (" + c.String() + "): players place stones in turn; " +
			"the first with k in a row on one axis wins (+1, others -1); a full board is a draw (0). " +
			"Observation: players+1 planes over the cells (own stones, opponents in turn order, empty). See docs/games.md.",
		Observation:     plugin.Space{Kind: "box", Shape: []int{c.Players + 1, geo.Cells()}, Low: make([]float32, n), High: high},
		Action:          plugin.Space{Kind: "discrete", N: geo.Cells()},
		NumPlayers:      c.Players,
		MaxEpisodeSteps: geo.Cells(),
		StateBytes:      kinrow.StateBytes(c),
	}
}

// Register registers configuration name (e.g. "square8_2p") as this
// module's game; it panics on an unknown name, failing the module's init.
func Register(name string) {
	c, err := kinrow.ParseConfig(name)
	if err != nil {
		panic(err)
	}
	plugin.RegisterGame(Meta(c), func() plugin.Game { return &Game{g: kinrow.MustNew(c)} })
}

// Game adapts kinrow.Game to the SDK's plugin.Game.
type Game struct{ g *kinrow.Game }

func (a *Game) Reset(seed uint64) { a.g.Reset() }

func (a *Game) ToMove(players []int32) []int32 {
	if p := a.g.ToMove(); p >= 0 {
		players = append(players, int32(p))
	}
	return players
}

func (a *Game) Legal(player int, mask []bool)     { a.g.Legal(player, mask) }
func (a *Game) Apply(player, action int) error    { return a.g.Apply(player, action) }
func (a *Game) Outcome(returns []float32) bool    { return a.g.Outcome(returns) }
func (a *Game) Save(buf []byte) []byte            { return a.g.Save(buf) }
func (a *Game) Restore(state []byte) error        { return a.g.Restore(state) }
func (a *Game) Observe(player int, obs []float32) { a.g.Observe(player, obs) }
