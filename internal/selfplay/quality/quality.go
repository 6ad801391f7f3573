// Package quality is the self-play quality gate: a batch of games is
// exported for training only when enough of it is clean (no illegal moves,
// finished within the length bounds, not a duplicate of another game),
// enough of it is decisive, and there are enough games.
package quality

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/trainyard/trainyard/internal/selfplay"
)

// Defaults from the seed's export pipeline (quality score > 0.7, 1,000+
// games).
const (
	DefaultThreshold   = 0.7
	DefaultMinGames    = 1000
	DefaultMinMoves    = 1
	DefaultMinDecisive = 0.3
)

// Config is the gate. Zero fields take the defaults; MaxMoves 0 means no
// upper bound beyond the game having ended.
type Config struct {
	Threshold   float64 `json:"threshold,omitempty" doc:"Minimum quality score in [0,1] (default 0.7)." minimum:"0" maximum:"1"`
	MinGames    int     `json:"min_games,omitempty" doc:"Minimum games in a batch (default 1000)." minimum:"0"`
	MinMoves    int     `json:"min_moves,omitempty" doc:"Shorter games are rejected (default 1)." minimum:"0"`
	MaxMoves    int     `json:"max_moves,omitempty" doc:"Longer games are rejected (0: no bound)." minimum:"0"`
	MinDecisive float64 `json:"min_decisive,omitempty" doc:"Decisive-game ratio that earns the full score (default 0.3)." minimum:"0" maximum:"1"`
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.Threshold == 0 {
		c.Threshold = DefaultThreshold
	}
	if c.MinGames == 0 {
		c.MinGames = DefaultMinGames
	}
	if c.MinMoves == 0 {
		c.MinMoves = DefaultMinMoves
	}
	if c.MinDecisive == 0 {
		c.MinDecisive = DefaultMinDecisive
	}
	return c
}

// Validate reports the first out-of-range field.
func (c Config) Validate() error {
	switch {
	case c.Threshold < 0 || c.Threshold > 1:
		return fmt.Errorf("threshold %v outside [0,1]", c.Threshold)
	case c.MinDecisive < 0 || c.MinDecisive > 1:
		return fmt.Errorf("min_decisive %v outside [0,1]", c.MinDecisive)
	case c.MinGames < 0 || c.MinMoves < 0 || c.MaxMoves < 0:
		return fmt.Errorf("min_games, min_moves and max_moves must not be negative")
	case c.MaxMoves > 0 && c.MaxMoves < c.MinMoves:
		return fmt.Errorf("max_moves %d below min_moves %d", c.MaxMoves, c.MinMoves)
	}
	return nil
}

// Report is the gate's verdict on one batch.
type Report struct {
	Games      int `json:"games"`
	Clean      int `json:"clean" doc:"Games kept for export."`
	Illegal    int `json:"illegal" doc:"Games with an illegal move."`
	Unfinished int `json:"unfinished" doc:"Games stopped at the length cap without an end."`
	TooShort   int `json:"too_short"`
	TooLong    int `json:"too_long"`
	Duplicates int `json:"duplicates" doc:"Games whose move sequence repeats an earlier game's."`
	Decisive   int `json:"decisive" doc:"Clean games with a winner (not every seat the same outcome)."`
	// Score = clean/games × min(1, decisive ratio / MinDecisive).
	Score  float64 `json:"score"`
	Passed bool    `json:"passed"`
	Reason string  `json:"reason,omitempty" doc:"Why the batch failed the gate."`
	// Keep lists the clean games' indexes, the ones to export.
	Keep []int `json:"-"`
}

// DecisiveRatio is the share of clean games with a winner.
func (r Report) DecisiveRatio() float64 {
	if r.Clean == 0 {
		return 0
	}
	return float64(r.Decisive) / float64(r.Clean)
}

// Check grades games against c (defaults filled in). Each game counts
// against the first rule it breaks, in the order of Report's fields.
func Check(games []selfplay.Game, c Config) Report {
	c = c.WithDefaults()
	r := Report{Games: len(games)}
	seen := map[uint64]bool{}
	for i, g := range games {
		n := len(g.Moves)
		switch {
		case g.Illegal > 0:
			r.Illegal++
			continue
		case !g.Terminal:
			r.Unfinished++
			continue
		case n < c.MinMoves:
			r.TooShort++
			continue
		case c.MaxMoves > 0 && n > c.MaxMoves:
			r.TooLong++
			continue
		}
		k := key(g)
		if seen[k] {
			r.Duplicates++
			continue
		}
		seen[k] = true
		r.Clean++
		r.Keep = append(r.Keep, i)
		if decisive(g) {
			r.Decisive++
		}
	}
	if r.Games > 0 {
		r.Score = float64(r.Clean) / float64(r.Games) * min(1, r.DecisiveRatio()/c.MinDecisive)
	}
	switch {
	case r.Games < c.MinGames:
		r.Reason = fmt.Sprintf("%d games, the gate needs at least %d", r.Games, c.MinGames)
	case r.Score < c.Threshold:
		r.Reason = fmt.Sprintf("quality score %.3f below %.3f (%d of %d clean: %d illegal, %d unfinished, %d too short, %d too long, %d duplicates; %.0f%% decisive)",
			r.Score, c.Threshold, r.Clean, r.Games, r.Illegal, r.Unfinished, r.TooShort, r.TooLong, r.Duplicates, 100*r.DecisiveRatio())
	default:
		r.Passed = true
	}
	return r
}

// Kept returns the clean games of a checked batch.
func (r Report) Kept(games []selfplay.Game) []selfplay.Game {
	out := make([]selfplay.Game, 0, len(r.Keep))
	for _, i := range r.Keep {
		out = append(out, games[i])
	}
	return out
}

// key identifies a game by its config, seats and move sequence.
func key(g selfplay.Game) uint64 {
	h := fnv.New64a()
	h.Write([]byte(g.Config))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(g.Players))
	h.Write(b[:])
	for _, m := range g.Moves {
		binary.LittleEndian.PutUint32(b[:4], uint32(m.Player))
		binary.LittleEndian.PutUint32(b[4:], uint32(m.Action))
		h.Write(b[:])
	}
	return h.Sum64()
}

func decisive(g selfplay.Game) bool {
	for _, o := range g.Outcome[min(1, len(g.Outcome)):] {
		if o != g.Outcome[0] {
			return true
		}
	}
	return false
}
