package engine

import (
	"fmt"

	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/games/kinrow"
)

// Native is n k-in-a-row games run in Go behind the Games interface: the
// same rules the kinrow plugins wrap (their parity test plays both in
// lockstep), without the sandbox. MCTS searches on it; self-play records
// still come from the plugin. Errors a plugin reports as bad input (an
// illegal move, a bad state) wrap pluginhost.ErrBadInput here too.
type Native struct {
	meta  pluginhost.Metadata
	games []*kinrow.Game
}

// NewNative creates n games of configuration cfg.
func NewNative(cfg kinrow.Config, n int) (*Native, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	geo, err := kinrow.GeometryOf(cfg.Board)
	if err != nil {
		return nil, err
	}
	d := kinrow.ObsDim(cfg)
	high := make([]float32, d)
	for i := range high {
		high[i] = 1
	}
	nt := &Native{meta: pluginhost.Metadata{
		ABIVersion: pluginhost.ABIVersion, Name: "kinrow-" + cfg.String(), Version: "native", Kind: pluginhost.KindGame,
		Observation:     envs.Space{Kind: envs.Box, Shape: []int{cfg.Players + 1, geo.Cells()}, Low: make([]float32, d), High: high},
		Action:          envs.Space{Kind: envs.Discrete, N: geo.Cells()},
		NumPlayers:      cfg.Players,
		MaxEpisodeSteps: geo.Cells(),
		StateBytes:      kinrow.StateBytes(cfg),
	}}
	for i := 0; i < n; i++ {
		nt.games = append(nt.games, kinrow.MustNew(cfg))
	}
	return nt, nil
}

func (nt *Native) game(i int) (*kinrow.Game, error) {
	if i < 0 || i >= len(nt.games) {
		return nil, fmt.Errorf("kinrow native: game %d outside [0,%d)", i, len(nt.games))
	}
	return nt.games[i], nil
}

func (nt *Native) player(p int) error {
	if p < 0 || p >= nt.meta.NumPlayers {
		return fmt.Errorf("kinrow native: player %d outside [0,%d)", p, nt.meta.NumPlayers)
	}
	return nil
}

// Metadata is what the plugin of the same config declares.
func (nt *Native) Metadata() pluginhost.Metadata { return nt.meta }

// Game is game i itself, for callers that want the rules directly.
func (nt *Native) Game(i int) *kinrow.Game { return nt.games[i] }

func (nt *Native) Reset(i int, seed uint64) error {
	g, err := nt.game(i)
	if err != nil {
		return err
	}
	g.Reset()
	return nil
}

func (nt *Native) ToMove(i int, dst []int) ([]int, error) {
	g, err := nt.game(i)
	if err != nil {
		return dst, err
	}
	if p := g.ToMove(); p >= 0 {
		dst = append(dst, p)
	}
	return dst, nil
}

func (nt *Native) Legal(i, p int, mask []bool) error {
	g, err := nt.game(i)
	if err != nil {
		return err
	}
	if err := nt.player(p); err != nil {
		return err
	}
	g.Legal(p, mask)
	return nil
}

func (nt *Native) Apply(i, p, a int) error {
	g, err := nt.game(i)
	if err != nil {
		return err
	}
	if err := g.Apply(p, a); err != nil {
		return fmt.Errorf("%w: %v", pluginhost.ErrBadInput, err)
	}
	return nil
}

func (nt *Native) Outcome(i int, returns []float32) (bool, error) {
	g, err := nt.game(i)
	if err != nil {
		return false, err
	}
	return g.Outcome(returns), nil
}

func (nt *Native) Save(i int, dst []byte) ([]byte, error) {
	g, err := nt.game(i)
	if err != nil {
		return dst, err
	}
	return g.Save(dst), nil
}

func (nt *Native) Restore(i int, state []byte) error {
	g, err := nt.game(i)
	if err != nil {
		return err
	}
	if err := g.Restore(state); err != nil {
		return fmt.Errorf("%w: %v", pluginhost.ErrBadInput, err)
	}
	return nil
}

func (nt *Native) Observe(i, p int, obs []float32) error {
	g, err := nt.game(i)
	if err != nil {
		return err
	}
	if err := nt.player(p); err != nil {
		return err
	}
	g.Observe(p, obs)
	return nil
}
