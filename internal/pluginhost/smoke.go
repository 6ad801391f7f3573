package pluginhost

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
)

// smokeSteps is how many batch steps Validate runs.
const smokeSteps = 8

// smoke exercises a freshly loaded module the way a run would, under its
// limits, and checks outputs are well-formed (finite numbers).
func (m *Module) smoke(ctx context.Context) error {
	if m.importsCapability() {
		return m.smokeWithoutCapabilities(ctx)
	}
	switch m.meta.Kind {
	case KindEnv:
		return m.smokeEnv(ctx)
	case KindReward:
		return m.smokeReward(ctx)
	case KindGame:
		return m.smokeGame(ctx)
	}
	return fmt.Errorf("plugin %s: smoke: unknown kind %q", m.label, m.meta.Kind)
}

func finite(call, label string, xs []float32) error {
	for i, x := range xs {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return &CallError{Plugin: label, Call: call, Err: fmt.Errorf("%w: value %d is %v", ErrProtocol, i, x)}
		}
	}
	return nil
}

func (m *Module) smokeEnv(ctx context.Context) error {
	n := m.meta.Slots(2)
	v, err := m.NewVecEnv(ctx, n, 1)
	if err != nil {
		return err
	}
	defer v.Close()
	od, ad := v.od, v.ad
	obs, fin := make([]float32, n*od), make([]float32, n*od)
	act, rew := make([]float32, n*ad), make([]float32, n)
	term, trunc := make([]bool, n), make([]bool, n)
	if err := v.Reset(1, obs); err != nil {
		return err
	}
	if err := finite("reset", m.label, obs); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < smokeSteps; i++ {
		sample(m.meta.Action, rng, act)
		if err := v.Step(act, obs, rew, term, trunc, fin); err != nil {
			return err
		}
		if err := finite("step_batch", m.label, obs); err != nil {
			return err
		}
		if err := finite("step_batch", m.label, rew); err != nil {
			return err
		}
	}
	return nil
}

func (m *Module) smokeReward(ctx context.Context) error {
	od, ad := max(m.meta.Observation.Dim(), 4), max(m.meta.Action.Dim(), 1)
	if m.meta.Observation.Kind != "" {
		od = m.meta.Observation.Dim()
	}
	if m.meta.Action.Kind != "" {
		ad = m.meta.Action.Dim()
	}
	const n = 4
	obs, next, act := make([]float32, n*od), make([]float32, n*od), make([]float32, n*ad)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range obs {
		obs[i], next[i] = rng.Float32(), rng.Float32()
	}
	env, out := []float32{1, 0, -1, 0.5}, make([]float32, n)
	if err := m.RewardBatch(ctx, od, ad, obs, act, next, env, out); err != nil {
		return err
	}
	return finite("reward_batch", m.label, out)
}

// smokeGame plays one game with random legal moves, saving and restoring the
// state once, for at most 1000 moves.
func (m *Module) smokeGame(ctx context.Context) error {
	g, err := m.NewGames(ctx, 1, 1)
	if err != nil {
		return err
	}
	defer g.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	mask := make([]bool, m.meta.Action.N)
	obs := make([]float32, m.meta.Observation.Dim())
	returns := make([]float32, m.meta.NumPlayers)
	var players []int
	for move := 0; move < 1000; move++ {
		over, err := g.Outcome(0, returns)
		if err != nil {
			return err
		}
		if over {
			return finite("game_outcome", m.label, returns)
		}
		if players, err = g.ToMove(0, players[:0]); err != nil {
			return err
		}
		if len(players) == 0 {
			return &CallError{Plugin: m.label, Call: "game_to_move", Err: fmt.Errorf("%w: no player to move in a game that is not over", ErrProtocol)}
		}
		if move == 1 {
			st, err := g.Save(0, nil)
			if err != nil {
				return err
			}
			if err := g.Restore(0, st); err != nil {
				return err
			}
		}
		for _, p := range players {
			if err := g.Observe(0, p, obs); err != nil {
				return err
			}
			if err := finite("game_observe", m.label, obs); err != nil {
				return err
			}
			if err := g.Legal(0, p, mask); err != nil {
				return err
			}
			var legal []int
			for a, ok := range mask {
				if ok {
					legal = append(legal, a)
				}
			}
			if len(legal) == 0 {
				return &CallError{Plugin: m.label, Call: "game_legal", Err: fmt.Errorf("%w: player %d to move has no legal action", ErrProtocol, p)}
			}
			if err := g.Apply(0, p, legal[rng.IntN(len(legal))]); err != nil {
				return err
			}
		}
	}
	return nil
}
