// Package plugin is the Go guest SDK for Trainyard's WASM plugin ABI v1
// (docs/plugin-abi.md). A plugin's main package registers exactly one
// environment, reward function or game from an init function; the SDK owns
// the exports, the buffers and the batching:
//
//	func init() { plugin.RegisterEnv(meta, func() plugin.Env { return &myEnv{} }) }
//	func main() {}
//
// Build with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
//
// The batching logic lives in platform-independent files so it is unit-tested
// natively; only the export glue (abi_wasip1.go) is wasm-specific.
package plugin

import (
	"encoding"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

// ABIVersion is the plugin ABI this SDK implements.
const ABIVersion = 1

// Status codes every ABI call returns.
const (
	StatusOK       = 0 // success
	StatusBadInput = 1 // the call's arguments were rejected; the instance is intact
	StatusFault    = 2 // the plugin failed (panic); the host discards the instance
)

// Kind of plugin.
const (
	KindEnv    = "env"
	KindReward = "reward"
	KindGame   = "game"
)

// Space is envs.Space (sdk/go/envs), which the host uses too: one
// definition of the JSON shape and of Dim for host and guest.
type Space = envs.Space

// Metadata is what the plugin's metadata export returns as JSON.
type Metadata struct {
	Name            string `json:"name"`
	Version         string `json:"version"`
	Kind            string `json:"kind"`
	Description     string `json:"description,omitempty"`
	Observation     Space  `json:"observation_space"`
	Action          Space  `json:"action_space"`
	NumPlayers      int    `json:"num_players,omitempty"`
	MaxEpisodeSteps int    `json:"max_episode_steps,omitempty"`
	StateBytes      int    `json:"state_bytes,omitempty"` // games: upper bound of a saved state
	// Agents names a multi-agent env's agents: its batch's slots are
	// agents, instance-major (envs.Spec.MultiAgent; register the game's
	// sdk/go/envs/multiagent batch with RegisterVecEnv).
	Agents []string `json:"agents,omitempty"`
	// ActionMask says the last action_space.n values of every observation
	// are the legal actions (1 legal, 0 not; envs.Spec.ActionMask).
	ActionMask bool `json:"action_mask,omitempty"`
	// Capabilities the plugin asks for, e.g. "http:llm" to call the
	// inference endpoint the run grants as "llm" (see HTTP).
	Capabilities []string `json:"capabilities,omitempty"`
}

// Env is one environment instance, stepped by the SDK's batch loop.
type Env interface {
	// Seed reseeds the instance's random source.
	Seed(seed uint64)
	// Reset starts an episode drawing from the instance's random source and
	// writes the first observation.
	Reset(obs []float32)
	// Step applies one action and writes the next observation.
	Step(action, obs []float32) (reward float32, terminated, truncated bool)
}

// VecEnv lets a plugin own batching itself (e.g. to run a native vector
// environment unchanged). Semantics are those of the host's envs.VecEnv.
type VecEnv interface {
	Reset(seed uint64, obs []float32) error
	Step(actions, obs, rewards []float32, terminated, truncated []bool, finalObs []float32) error
}

// RewardFunc shapes one transition's reward. obs, action and nextObs have the
// dimensions of the environment the reward is composed with.
type RewardFunc func(obs, action, nextObs []float32, envReward float32) float32

// Game is one game instance for self-play and tree search.
type Game interface {
	// Reset starts a new game from seed.
	Reset(seed uint64)
	// ToMove appends the players whose move it is (empty when terminal).
	ToMove(players []int32) []int32
	// Legal marks legal actions for player in mask (len = action space n).
	Legal(player int, mask []bool)
	// Apply plays action for player; an illegal action is an error.
	Apply(player, action int) error
	// Outcome reports whether the game is over and writes per-player returns.
	Outcome(returns []float32) (terminal bool)
	// Save appends the complete game state to buf.
	Save(buf []byte) []byte
	// Restore replaces the game state with one produced by Save.
	Restore(state []byte) error
	// Observe writes player's observation.
	Observe(player int, obs []float32)
}

// registered is the one plugin this module implements.
var registered struct {
	meta     Metadata
	metaJSON []byte
	newEnv   func() Env
	newVec   func(n int) (VecEnv, error)
	reward   RewardFunc
	newGame  func() Game
}

func register(meta Metadata, kind string) {
	if registered.meta.Kind != "" {
		panic("plugin: more than one plugin registered in one module")
	}
	meta.Kind = kind
	b, err := json.Marshal(struct {
		ABIVersion int `json:"abi_version"`
		Metadata
	}{ABIVersion, meta})
	if err != nil {
		panic(fmt.Sprintf("plugin: encode metadata: %v", err))
	}
	registered.meta, registered.metaJSON = meta, b
}

// RegisterEnv registers an environment built from single instances; the SDK
// batches them, seeds instance i with seed+i, auto-resets finished ones and
// truncates at meta.MaxEpisodeSteps (when > 0).
func RegisterEnv(meta Metadata, newEnv func() Env) {
	register(meta, KindEnv)
	registered.newEnv = newEnv
}

// RegisterVecEnv registers an environment that batches itself.
func RegisterVecEnv(meta Metadata, newVec func(n int) (VecEnv, error)) {
	register(meta, KindEnv)
	registered.newVec = newVec
}

// RegisterReward registers a reward-shaping function.
func RegisterReward(meta Metadata, fn RewardFunc) {
	register(meta, KindReward)
	registered.reward = fn
}

// RegisterGame registers a game.
func RegisterGame(meta Metadata, newGame func() Game) {
	register(meta, KindGame)
	registered.newGame = newGame
}

// errBadInput marks errors caused by the host's arguments.
var errBadInput = errors.New("bad input")

func badInput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadInput, fmt.Sprintf(format, args...))
}

// envBatch adapts single Envs to the batch ABI.
type envBatch struct {
	envs  []Env
	steps []int
	limit int
	od    int
	ad    int
}

func newEnvBatch(n int, meta Metadata, newEnv func() Env) *envBatch {
	b := &envBatch{envs: make([]Env, n), steps: make([]int, n), limit: meta.MaxEpisodeSteps,
		od: meta.Observation.Dim(), ad: meta.Action.Dim()}
	for i := range b.envs {
		b.envs[i] = newEnv()
	}
	return b
}

func (b *envBatch) Reset(seed uint64, obs []float32) error {
	if len(obs) != len(b.envs)*b.od {
		return badInput("reset: obs has %d values, want %d", len(obs), len(b.envs)*b.od)
	}
	for i, e := range b.envs {
		e.Seed(seed + uint64(i))
		e.Reset(obs[i*b.od : (i+1)*b.od])
		b.steps[i] = 0
	}
	return nil
}

// StateSaver is what a VecEnv implements when its whole state can be saved
// and put back (the plugin then exports env_save and env_restore): a
// checkpoint of a run on it resumes its episodes bit for bit. The SDK's
// batch of single Envs implements it when every Env is an
// encoding.BinaryMarshaler and encoding.BinaryUnmarshaler; a VecEnv with
// Snapshot() ([]byte, error) and RestoreSnapshot([]byte) error (as the
// native envs of sdk/go/envs/native have) is saved through those.
type StateSaver interface {
	SaveState(dst []byte) ([]byte, error)
	RestoreState(b []byte) error
}

// snapshotter is the save/restore shape of the native reference envs
// (sdk/go/envs/native), which a plugin can register as its VecEnv as is.
type snapshotter interface {
	Snapshot() ([]byte, error)
	RestoreSnapshot(b []byte) error
}

// snapshotSaver is a StateSaver over a snapshotter.
type snapshotSaver struct{ s snapshotter }

func (a snapshotSaver) SaveState(dst []byte) ([]byte, error) {
	b, err := a.s.Snapshot()
	if err != nil {
		return dst, fmt.Errorf("env_save: %w", err)
	}
	return append(dst, b...), nil
}

func (a snapshotSaver) RestoreState(b []byte) error {
	if err := a.s.RestoreSnapshot(b); err != nil {
		return badInput("env_restore: %v", err)
	}
	return nil
}

// stateSaverOf is v's StateSaver: v itself, or an adapter when v has the
// native envs' Snapshot and RestoreSnapshot.
func stateSaverOf(v VecEnv) (StateSaver, bool) {
	if s, ok := v.(StateSaver); ok {
		return s, true
	}
	if s, ok := v.(snapshotter); ok {
		return snapshotSaver{s}, true
	}
	return nil, false
}

// SaveState appends, per env, its step count and its MarshalBinary state.
func (b *envBatch) SaveState(dst []byte) ([]byte, error) {
	for i, e := range b.envs {
		m, ok := e.(encoding.BinaryMarshaler)
		if !ok {
			return dst, badInput("env_save: the env does not implement encoding.BinaryMarshaler")
		}
		st, err := m.MarshalBinary()
		if err != nil {
			return dst, fmt.Errorf("env_save: env %d: %w", i, err)
		}
		dst = binary.LittleEndian.AppendUint64(dst, uint64(b.steps[i]))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(st)))
		dst = append(dst, st...)
	}
	return dst, nil
}

// RestoreState puts back a state SaveState wrote for as many envs.
func (b *envBatch) RestoreState(p []byte) error {
	for i, e := range b.envs {
		u, ok := e.(encoding.BinaryUnmarshaler)
		if !ok {
			return badInput("env_restore: the env does not implement encoding.BinaryUnmarshaler")
		}
		if len(p) < 12 {
			return badInput("env_restore: state ends before env %d", i)
		}
		steps, n := binary.LittleEndian.Uint64(p), int(binary.LittleEndian.Uint32(p[8:]))
		p = p[12:]
		if n > len(p) {
			return badInput("env_restore: env %d's state needs %d bytes, %d left", i, n, len(p))
		}
		if err := u.UnmarshalBinary(p[:n]); err != nil {
			return badInput("env_restore: env %d: %v", i, err)
		}
		b.steps[i] = int(steps)
		p = p[n:]
	}
	if len(p) != 0 {
		return badInput("env_restore: %d bytes after the last env (a state for more envs?)", len(p))
	}
	return nil
}

func (b *envBatch) Step(actions, obs, rewards []float32, terminated, truncated []bool, finalObs []float32) error {
	od, ad := b.od, b.ad
	for i, e := range b.envs {
		o := obs[i*od : (i+1)*od]
		r, term, trunc := e.Step(actions[i*ad:(i+1)*ad], o)
		b.steps[i]++
		if b.limit > 0 && b.steps[i] >= b.limit && !term {
			trunc = true
		}
		rewards[i], terminated[i], truncated[i] = r, term, trunc
		if term || trunc {
			copy(finalObs[i*od:(i+1)*od], o)
			e.Reset(o)
			b.steps[i] = 0
		}
	}
	return nil
}

// checkActions rejects actions outside the declared action space: NaN for
// Box, non-integral or out-of-range for Discrete/MultiDiscrete. Bounds of a
// Box are not enforced (Gymnasium clips inside the env where it matters).
func checkActions(s Space, actions []float32) error {
	switch s.Kind {
	case "discrete":
		for i, a := range actions {
			if a != a || a < 0 || a >= float32(s.N) || a != float32(int(a)) {
				return badInput("action %d = %v is not in Discrete(%d)", i, a, s.N)
			}
		}
	case "multi_discrete":
		d := len(s.Nvec)
		for i, a := range actions {
			n := s.Nvec[i%d]
			if a != a || a < 0 || a >= float32(n) || a != float32(int(a)) {
				return badInput("action %d = %v is not in [0,%d)", i, a, n)
			}
		}
	default:
		for i, a := range actions {
			if a != a {
				return badInput("action %d is NaN", i)
			}
		}
	}
	return nil
}

// rewardBatch applies fn over n transitions.
func rewardBatch(fn RewardFunc, n, od, ad int, obs, act, next, envR, out []float32) {
	for i := 0; i < n; i++ {
		out[i] = fn(obs[i*od:(i+1)*od], act[i*ad:(i+1)*ad], next[i*od:(i+1)*od], envR[i])
	}
}
