//go:build wasip1

package plugin

// The ABI v1 exports. Pointers are offsets into this module's linear memory,
// which for a Go wasip1 module are the Go pointers themselves. Every call
// returns a status; a panic becomes StatusFault with the message available
// from last_error.

import (
	"errors"
	"fmt"
	"unsafe"
)

var (
	lastErr []byte
	pinned  = map[uint32][]uint64{}
	vec     VecEnv
	nInst   int
	games   []Game
	players []int32
	mask    []bool
	state   []byte
)

func f32s(p, n uint32) []float32 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(uintptr(p))), n)
}

func bools(p, n uint32) []bool {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*bool)(unsafe.Pointer(uintptr(p))), n)
}

func bytesAt(p, n uint32) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(uintptr(p))), n)
}

func pack(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))<<32 | uint64(len(b))
}

// guard runs f, converting errors and panics to a status.
func guard(f func() error) (status int32) {
	defer func() {
		if r := recover(); r != nil {
			lastErr = fmt.Appendf(lastErr[:0], "panic: %v", r)
			status = StatusFault
		}
	}()
	if err := f(); err != nil {
		lastErr = append(lastErr[:0], err.Error()...)
		if errors.Is(err, errBadInput) {
			return StatusBadInput
		}
		return StatusFault
	}
	return StatusOK
}

func nonNull(ptrs ...uint32) error {
	for i, p := range ptrs {
		if p == 0 {
			return badInput("pointer argument %d is null", i)
		}
	}
	return nil
}

//go:wasmexport abi_version
func abiVersion() int32 { return ABIVersion }

//go:wasmexport metadata
func metadata() uint64 { return pack(registered.metaJSON) }

//go:wasmexport last_error
func lastError() uint64 { return pack(lastErr) }

//go:wasmexport alloc
func alloc(size uint32) uint32 {
	b := make([]uint64, (uint64(size)+7)/8+1)
	p := uint32(uintptr(unsafe.Pointer(&b[0])))
	pinned[p] = b
	return p
}

//go:wasmexport free
func free(p uint32) { delete(pinned, p) }

//go:wasmexport init
func initPlugin(n int32, seed uint64) int32 {
	return guard(func() error {
		if n <= 0 {
			return badInput("init: n = %d, want > 0", n)
		}
		m := registered.meta
		nInst, vec, games = int(n), nil, nil
		switch m.Kind {
		case KindEnv:
			if registered.newVec != nil {
				v, err := registered.newVec(int(n))
				if err != nil {
					return fmt.Errorf("init: %w", err)
				}
				vec = v
			} else {
				vec = newEnvBatch(int(n), m, registered.newEnv)
			}
		case KindGame:
			games = make([]Game, n)
			for i := range games {
				games[i] = registered.newGame()
				games[i].Reset(seed + uint64(i))
			}
			players = make([]int32, 0, m.NumPlayers)
			mask = make([]bool, m.Action.N)
		case KindReward:
		default:
			return errors.New("init: no plugin registered")
		}
		return nil
	})
}

//go:wasmexport reset
func reset(seed uint64, obs uint32) int32 {
	return guard(func() error {
		if vec == nil {
			return badInput("reset before init")
		}
		if err := nonNull(obs); err != nil {
			return err
		}
		return vec.Reset(seed, f32s(obs, uint32(nInst*registered.meta.Observation.Dim())))
	})
}

//go:wasmexport step_batch
func stepBatch(n int32, actions, obs, rewards, terminated, truncated, finalObs uint32) int32 {
	return guard(func() error {
		if vec == nil {
			return badInput("step_batch before init")
		}
		if int(n) != nInst {
			return badInput("step_batch: n = %d, init had %d", n, nInst)
		}
		if err := nonNull(actions, obs, rewards, terminated, truncated, finalObs); err != nil {
			return err
		}
		m := registered.meta
		od, ad := uint32(n)*uint32(m.Observation.Dim()), uint32(n)*uint32(m.Action.Dim())
		act := f32s(actions, ad)
		if err := checkActions(m.Action, act); err != nil {
			return err
		}
		return vec.Step(act, f32s(obs, od), f32s(rewards, uint32(n)),
			bools(terminated, uint32(n)), bools(truncated, uint32(n)), f32s(finalObs, od))
	})
}

// env_save writes the envs' whole state to buf (capacity bytes) and its
// length to *outLen; a state longer than capacity is StatusBadInput with
// *outLen set, so the host can retry with a larger buffer. A VecEnv that
// is not a StateSaver answers StatusBadInput: the host then checkpoints
// without the envs (their episodes restart on resume).
//
//go:wasmexport env_save
func envSave(buf, capacity, outLen uint32) int32 {
	return guard(func() error {
		if vec == nil {
			return badInput("env_save before init")
		}
		if err := nonNull(buf, outLen); err != nil {
			return err
		}
		s, ok := stateSaverOf(vec)
		if !ok {
			return badInput("env_save: this env cannot save its state")
		}
		var err error
		if state, err = s.SaveState(state[:0]); err != nil {
			return badInput("%v", err)
		}
		*(*uint32)(unsafe.Pointer(uintptr(outLen))) = uint32(len(state))
		if uint32(len(state)) > capacity {
			return badInput("env_save: state is %d bytes, buffer holds %d", len(state), capacity)
		}
		copy(bytesAt(buf, capacity), state)
		return nil
	})
}

// env_restore replaces the envs' state with n bytes from env_save.
//
//go:wasmexport env_restore
func envRestore(buf, n uint32) int32 {
	return guard(func() error {
		if vec == nil {
			return badInput("env_restore before init")
		}
		if err := nonNull(buf); err != nil {
			return err
		}
		s, ok := stateSaverOf(vec)
		if !ok {
			return badInput("env_restore: this env cannot restore a state")
		}
		return s.RestoreState(bytesAt(buf, n))
	})
}

//go:wasmexport reward_batch
func rewardBatchExport(n, obsDim, actDim int32, obs, actions, nextObs, envRewards, out uint32) int32 {
	return guard(func() error {
		if registered.reward == nil {
			return badInput("reward_batch: not a reward plugin")
		}
		if n < 0 || obsDim < 0 || actDim < 0 || int64(n)*int64(obsDim) > 1<<28 || int64(n)*int64(actDim) > 1<<28 {
			return badInput("reward_batch: bad sizes n=%d obs_dim=%d act_dim=%d", n, obsDim, actDim)
		}
		if err := nonNull(obs, actions, nextObs, envRewards, out); err != nil {
			return err
		}
		m := registered.meta
		if d := m.Observation.Dim(); d > 0 && d != int(obsDim) {
			return badInput("reward_batch: obs_dim %d, plugin wants %d", obsDim, d)
		}
		if d := m.Action.Dim(); d > 0 && d != int(actDim) {
			return badInput("reward_batch: act_dim %d, plugin wants %d", actDim, d)
		}
		on, an := uint32(n*obsDim), uint32(n*actDim)
		rewardBatch(registered.reward, int(n), int(obsDim), int(actDim),
			f32s(obs, on), f32s(actions, an), f32s(nextObs, on), f32s(envRewards, uint32(n)), f32s(out, uint32(n)))
		return nil
	})
}

// game checks a game index and the call's output pointers.
func game(g int32, ptrs ...uint32) (Game, error) {
	if g < 0 || int(g) >= len(games) {
		return nil, badInput("game index %d out of range [0,%d)", g, len(games))
	}
	return games[g], nonNull(ptrs...)
}

// gameFor is game plus a check of the player index.
func gameFor(g, p int32, ptrs ...uint32) (Game, error) {
	if p < 0 || int(p) >= registered.meta.NumPlayers {
		return nil, badInput("player %d out of range [0,%d)", p, registered.meta.NumPlayers)
	}
	return game(g, ptrs...)
}

//go:wasmexport game_reset
func gameReset(g int32, seed uint64) int32 {
	return guard(func() error {
		gm, err := game(g)
		if err != nil {
			return err
		}
		gm.Reset(seed)
		return nil
	})
}

//go:wasmexport game_to_move
func gameToMove(g int32, out, outCount uint32) int32 {
	return guard(func() error {
		gm, err := game(g, out, outCount)
		if err != nil {
			return err
		}
		players = gm.ToMove(players[:0])
		if len(players) > registered.meta.NumPlayers {
			return fmt.Errorf("game_to_move: %d players to move, num_players is %d", len(players), registered.meta.NumPlayers)
		}
		dst := unsafe.Slice((*int32)(unsafe.Pointer(uintptr(out))), len(players))
		copy(dst, players)
		*(*int32)(unsafe.Pointer(uintptr(outCount))) = int32(len(players))
		return nil
	})
}

//go:wasmexport game_legal
func gameLegal(g, player int32, out uint32) int32 {
	return guard(func() error {
		gm, err := gameFor(g, player, out)
		if err != nil {
			return err
		}
		m := bools(out, uint32(len(mask)))
		clear(m)
		gm.Legal(int(player), m)
		return nil
	})
}

//go:wasmexport game_apply
func gameApply(g, player, action int32) int32 {
	return guard(func() error {
		gm, err := gameFor(g, player)
		if err != nil {
			return err
		}
		if action < 0 || int(action) >= registered.meta.Action.N {
			return badInput("action %d out of range [0,%d)", action, registered.meta.Action.N)
		}
		if err := gm.Apply(int(player), int(action)); err != nil {
			return badInput("%v", err)
		}
		return nil
	})
}

//go:wasmexport game_outcome
func gameOutcome(g int32, returns, terminal uint32) int32 {
	return guard(func() error {
		gm, err := game(g, returns, terminal)
		if err != nil {
			return err
		}
		t := gm.Outcome(f32s(returns, uint32(registered.meta.NumPlayers)))
		*(*bool)(unsafe.Pointer(uintptr(terminal))) = t
		return nil
	})
}

//go:wasmexport game_save
func gameSave(g int32, buf, capacity, outLen uint32) int32 {
	return guard(func() error {
		gm, err := game(g, buf, outLen)
		if err != nil {
			return err
		}
		state = gm.Save(state[:0])
		*(*uint32)(unsafe.Pointer(uintptr(outLen))) = uint32(len(state))
		if uint32(len(state)) > capacity {
			return badInput("game_save: state is %d bytes, buffer holds %d", len(state), capacity)
		}
		copy(bytesAt(buf, capacity), state)
		return nil
	})
}

//go:wasmexport game_restore
func gameRestore(g int32, buf, n uint32) int32 {
	return guard(func() error {
		gm, err := game(g, buf)
		if err != nil {
			return err
		}
		if err := gm.Restore(bytesAt(buf, n)); err != nil {
			return badInput("game_restore: %v", err)
		}
		return nil
	})
}

//go:wasmexport game_observe
func gameObserve(g, player int32, obs uint32) int32 {
	return guard(func() error {
		gm, err := gameFor(g, player, obs)
		if err != nil {
			return err
		}
		gm.Observe(int(player), f32s(obs, uint32(registered.meta.Observation.Dim())))
		return nil
	})
}
