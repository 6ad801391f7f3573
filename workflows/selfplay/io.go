package selfplay

import (
	"time"

	"github.com/trainyard/trainyard/internal/selfplay/quality"
)

// PlayInput is one generation's self-play batch on a node.
type PlayInput struct {
	LoopID     string `json:"loop_id"`
	Config     string `json:"config"`
	GamePlugin string `json:"game_plugin"`
	Generation int    `json:"generation"`
	Attempt    int    `json:"attempt"`
	Games      int    `json:"games"`
	// ModelKey is the best model guiding MCTS; empty: Players says who
	// plays ("heuristic" or "mcts-rollouts").
	ModelKey     string        `json:"model_key,omitempty"`
	Players      string        `json:"players,omitempty"`
	Simulations  int           `json:"simulations"`
	Search       string        `json:"search,omitempty"`
	MaxMoves     int           `json:"max_moves,omitempty"`
	Parallel     int           `json:"parallel"`
	SyncInterval time.Duration `json:"sync_interval"`
	Seed         uint64        `json:"seed"`
	// Model serves ModelKey when the loop's model is yours; GPUs are the
	// allocation's.
	Model *ModelCommands `json:"model,omitempty"`
	GPUs  []int          `json:"gpus,omitempty"`
}

// PlayProgress is the batch activity's heartbeat and result.
type PlayProgress struct {
	Resumed int `json:"resumed" doc:"Games already in S3 when this attempt started."`
	Played  int `json:"played" doc:"Games this attempt finished."`
	Synced  int `json:"synced" doc:"Games of the generation in S3."`
	Batches int `json:"batches" doc:"Sync uploads this attempt made."`
	Target  int `json:"target"`
	// EvalBatch: with your model, how full its evaluator's batches were.
	EvalBatch float64 `json:"eval_batch,omitempty" doc:"Your model: mean positions per evaluator batch this attempt."`
}

// ExportInput grades a generation's games and exports the clean ones.
type ExportInput struct {
	LoopID     string   `json:"loop_id"`
	Config     string   `json:"config"`
	Generation int      `json:"generation"`
	Settings   Settings `json:"settings"`
}

// ExportResult is the gate's report and, when it passed, the export.
type ExportResult struct {
	Report    quality.Report `json:"report"`
	Dataset   string         `json:"dataset,omitempty"`
	Positions int            `json:"positions,omitempty"`
}

// TrainInput trains a candidate on the recent exports.
type TrainInput struct {
	LoopID     string   `json:"loop_id"`
	Config     string   `json:"config"`
	GamePlugin string   `json:"game_plugin"`
	Generation int      `json:"generation"`
	Model      string   `json:"model" doc:"The candidate's name."`
	Datasets   []string `json:"datasets"`
	FromKey    string   `json:"from_key,omitempty" doc:"Model to start from (the best), empty: fresh."`
	Epochs     int      `json:"epochs"`
	Seed       uint64   `json:"seed"`
	// ModelCommands train the candidate when the loop's model is yours.
	ModelCommands *ModelCommands `json:"model_commands,omitempty"`
	GPUs          []int          `json:"gpus,omitempty"`
}

// TrainResult is the candidate.
type TrainResult struct {
	Model string  `json:"model"`
	Key   string  `json:"key"`
	Loss  float64 `json:"loss"`
}

// Opponent in a gauntlet: a baseline (elo.Random, elo.Heuristic) or a
// model in S3.
type Opponent struct {
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
}

// GauntletInput pits a candidate against opponents.
type GauntletInput struct {
	LoopID      string     `json:"loop_id"`
	Config      string     `json:"config"`
	GamePlugin  string     `json:"game_plugin"`
	Generation  int        `json:"generation"`
	Candidate   Opponent   `json:"candidate"`
	Opponents   []Opponent `json:"opponents"`
	Games       int        `json:"games"`
	Simulations int        `json:"simulations"`
	Search      string     `json:"search,omitempty"`
	MaxMoves    int        `json:"max_moves,omitempty"`
	Parallel    int        `json:"parallel"`
	Seed        uint64     `json:"seed"`
	// Model serves the candidate and the best when the loop's model is
	// yours, an evaluator each.
	Model *ModelCommands `json:"model,omitempty"`
	GPUs  []int          `json:"gpus,omitempty"`
}

// GauntletResult is the candidate's results, one per opponent.
type GauntletResult struct {
	Results []GauntletScore `json:"results"`
}
