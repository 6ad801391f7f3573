package pluginhost

import (
	"context"
	"encoding/binary"
	"fmt"
)

// Games is a batch of game instances inside one sandboxed plugin instance,
// for self-play and tree search. Game g is addressed by index in [0, N).
// Not safe for concurrent use. After a failed call (other than ErrBadInput)
// the instance is discarded and every later call fails; create a new Games.
type Games struct {
	m    *Module
	ctx  context.Context
	in   *instance
	n    int
	meta Metadata

	// scratch buffers in guest memory
	players, count, mask, returns, terminal, state, obs uint32
	stateCap                                            int
}

// NewGames instantiates (or takes from the pool) an instance holding n games,
// game i reset with seed+i.
func (m *Module) NewGames(ctx context.Context, n int, seed uint64) (*Games, error) {
	if m.meta.Kind != KindGame {
		return nil, fmt.Errorf("plugin %s: NewGames: kind is %q, not game", m.label, m.meta.Kind)
	}
	if n < 1 || n > m.limits.MaxEnvs {
		return nil, fmt.Errorf("plugin %s: NewGames: n = %d outside [1,%d]", m.label, n, m.limits.MaxEnvs)
	}
	in, err := m.acquire(ctx)
	if err != nil {
		return nil, err
	}
	g := &Games{m: m, ctx: ctx, in: in, n: n, meta: m.meta}
	in.stack[0], in.stack[1] = uint64(n), seed
	if err := in.callStatus(ctx, fnInit, 2, m.limits.InitTimeout); err != nil {
		m.release(in)
		return nil, err
	}
	g.stateCap = m.meta.StateBytes
	if g.stateCap == 0 {
		g.stateCap = 4096
	}
	p := m.meta.NumPlayers
	sizes := []int{4 * p, 8, m.meta.Action.N, 4 * p, 8, g.stateCap, 4 * m.meta.Observation.Dim()}
	ptrs := []*uint32{&g.players, &g.count, &g.mask, &g.returns, &g.terminal, &g.state, &g.obs}
	for i, size := range sizes {
		if *ptrs[i], err = in.alloc(ctx, size); err != nil {
			m.release(in)
			return nil, err
		}
	}
	return g, nil
}

// NumGames is N.
func (g *Games) NumGames() int { return g.n }

// Metadata of the game plugin.
func (g *Games) Metadata() Metadata { return g.meta }

func (g *Games) do(f fn, nargs int) error {
	if g.in == nil {
		return fmt.Errorf("plugin %s: %s: games %w", g.m.label, fnNames[f], ErrClosed)
	}
	err := g.in.callStatus(g.ctx, f, nargs, g.m.limits.CallTimeout)
	if err != nil && g.in.broken {
		g.m.release(g.in)
		g.in = nil
	}
	return err
}

func (g *Games) check(call string, game, player int) error {
	if game < 0 || game >= g.n {
		return fmt.Errorf("plugin %s: %s: game %d outside [0,%d)", g.m.label, call, game, g.n)
	}
	if player < 0 || player >= g.meta.NumPlayers {
		return fmt.Errorf("plugin %s: %s: player %d outside [0,%d)", g.m.label, call, player, g.meta.NumPlayers)
	}
	return nil
}

// Reset starts game `game` anew from seed.
func (g *Games) Reset(game int, seed uint64) error {
	if err := g.check("game_reset", game, 0); err != nil {
		return err
	}
	g.in.stack[0], g.in.stack[1] = uint64(game), seed
	return g.do(fnGameReset, 2)
}

// ToMove appends the players to move to dst (none when the game is over).
func (g *Games) ToMove(game int, dst []int) ([]int, error) {
	if err := g.check("game_to_move", game, 0); err != nil {
		return dst, err
	}
	in := g.in
	in.stack[0], in.stack[1], in.stack[2] = uint64(game), uint64(g.players), uint64(g.count)
	if err := g.do(fnGameToMove, 3); err != nil {
		return dst, err
	}
	c := int(int32(binary.LittleEndian.Uint32(in.bytesAt(g.count, 4))))
	if c < 0 || c > g.meta.NumPlayers {
		return dst, g.protocol("game_to_move", "player count %d outside [0,%d]", c, g.meta.NumPlayers)
	}
	b := in.bytesAt(g.players, 4*c)
	for i := 0; i < c; i++ {
		p := int(int32(binary.LittleEndian.Uint32(b[4*i:])))
		if p < 0 || p >= g.meta.NumPlayers {
			return dst, g.protocol("game_to_move", "player %d outside [0,%d)", p, g.meta.NumPlayers)
		}
		dst = append(dst, p)
	}
	return dst, nil
}

func (g *Games) protocol(call, format string, args ...any) error {
	if g.in != nil {
		g.in.broken = true
		g.m.release(g.in)
		g.in = nil
	}
	return &CallError{Plugin: g.m.label, Call: call, Err: fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))}
}

// Legal writes player's legal-action mask (len = action space n) into mask.
func (g *Games) Legal(game, player int, mask []bool) error {
	if err := g.check("game_legal", game, player); err != nil {
		return err
	}
	if len(mask) != g.meta.Action.N {
		return fmt.Errorf("plugin %s: game_legal: mask has %d entries, want %d", g.m.label, len(mask), g.meta.Action.N)
	}
	in := g.in
	in.stack[0], in.stack[1], in.stack[2] = uint64(game), uint64(player), uint64(g.mask)
	if err := g.do(fnGameLegal, 3); err != nil {
		return err
	}
	for i, b := range in.bytesAt(g.mask, len(mask)) {
		mask[i] = b != 0
	}
	return nil
}

// Apply plays action for player. An illegal action is ErrBadInput.
func (g *Games) Apply(game, player, action int) error {
	if err := g.check("game_apply", game, player); err != nil {
		return err
	}
	g.in.stack[0], g.in.stack[1], g.in.stack[2] = uint64(game), uint64(player), uint64(uint32(int32(action)))
	return g.do(fnGameApply, 3)
}

// Outcome reports whether the game is over; returns gets per-player returns.
func (g *Games) Outcome(game int, returns []float32) (bool, error) {
	if err := g.check("game_outcome", game, 0); err != nil {
		return false, err
	}
	if len(returns) != g.meta.NumPlayers {
		return false, fmt.Errorf("plugin %s: game_outcome: returns has %d entries, want %d", g.m.label, len(returns), g.meta.NumPlayers)
	}
	in := g.in
	in.stack[0], in.stack[1], in.stack[2] = uint64(game), uint64(g.returns), uint64(g.terminal)
	if err := g.do(fnGameOutcome, 3); err != nil {
		return false, err
	}
	copy(returns, in.f32At(g.returns, len(returns)))
	return in.bytesAt(g.terminal, 1)[0] != 0, nil
}

// Save appends the game's state to dst (capped at Limits.MaxStateBytes).
func (g *Games) Save(game int, dst []byte) ([]byte, error) {
	if err := g.check("game_save", game, 0); err != nil {
		return dst, err
	}
	in := g.in
	in.stack[0], in.stack[1], in.stack[2], in.stack[3] = uint64(game), uint64(g.state), uint64(g.stateCap), uint64(g.count)
	if err := g.do(fnGameSave, 4); err != nil {
		return dst, err
	}
	n := int(binary.LittleEndian.Uint32(in.bytesAt(g.count, 4)))
	if n > g.stateCap {
		return dst, g.protocol("game_save", "reported %d bytes, buffer holds %d", n, g.stateCap)
	}
	return append(dst, in.bytesAt(g.state, n)...), nil
}

// Restore replaces the game's state with one from Save.
func (g *Games) Restore(game int, state []byte) error {
	if err := g.check("game_restore", game, 0); err != nil {
		return err
	}
	if len(state) > g.stateCap {
		return fmt.Errorf("plugin %s: game_restore: state of %d bytes exceeds %d", g.m.label, len(state), g.stateCap)
	}
	in := g.in
	copy(in.bytesAt(g.state, len(state)), state)
	in.stack[0], in.stack[1], in.stack[2] = uint64(game), uint64(g.state), uint64(len(state))
	return g.do(fnGameRestore, 3)
}

// Observe writes player's observation of the game into obs.
func (g *Games) Observe(game, player int, obs []float32) error {
	if err := g.check("game_observe", game, player); err != nil {
		return err
	}
	d := g.meta.Observation.Dim()
	if len(obs) != d {
		return fmt.Errorf("plugin %s: game_observe: obs has %d values, want %d", g.m.label, len(obs), d)
	}
	in := g.in
	in.stack[0], in.stack[1], in.stack[2] = uint64(game), uint64(player), uint64(g.obs)
	if err := g.do(fnGameObserve, 3); err != nil {
		return err
	}
	copy(obs, in.f32At(g.obs, d))
	return nil
}

// Close returns the instance to the pool.
func (g *Games) Close() error {
	if g.in != nil {
		g.m.release(g.in)
		g.in = nil
	}
	return nil
}
