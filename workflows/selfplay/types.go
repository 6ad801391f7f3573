// Package selfplay is the self-play pipeline as one long-lived workflow per
// game config: each generation plays a batch of games on a cluster node
// (synced to S3 every few seconds, so a node that vanishes costs at most
// one sync interval of games), passes them through the quality gate,
// exports them as NumPy .npz, trains a policy+value model on the recent
// exports, pits it against the current best and the random and heuristic
// baselines, updates Elo and promotes it when it wins. The loop continues
// as new every few generations; its state is a query.
package selfplay

import (
	"fmt"
	"time"

	"github.com/trainyard/trainyard/internal/selfplay/elo"
	"github.com/trainyard/trainyard/internal/selfplay/quality"
	"github.com/trainyard/trainyard/internal/selfplay/schedule"
)

// Name is the workflow type.
const Name = "SelfplayLoop"

// Query and signal names.
const (
	QueryState = "state"
	SignalStop = "stop"
	// SignalWork sends a populator-driven loop work items ([]WorkItem).
	SignalWork = "work"
)

// Error types.
const (
	ErrFailed = "SelfplayFailed" // the loop cannot continue (bad plugin, bad settings)
	// ErrDrained: the node drains; the activity synced what it finished
	// and the loop moves it to another node (not counted as a failure).
	ErrDrained = "SelfplayNodeDrained"
)

// WorkflowID is the loop's workflow id for a config on a cluster.
func WorkflowID(cluster, config string) string { return "selfplay/" + cluster + "/" + config }

// Prefix is where a loop keeps its objects in S3.
func Prefix(loopID string) string { return loopID + "/" }

// Root searches (Settings.Search).
const (
	SearchPUCT   = "puct"
	SearchGumbel = "gumbel"
)

// Settings are a loop's knobs; zero fields take the defaults.
type Settings struct {
	Generations        int            `json:"generations,omitempty" doc:"Stop after this many generations (0: until stopped)." minimum:"0"`
	GamesPerGeneration int            `json:"games_per_generation,omitempty" doc:"Self-play games per generation (default 1000)." minimum:"0"`
	BootstrapGames     int            `json:"bootstrap_games,omitempty" doc:"Games in a generation played before a model exists, by the bootstrap player (default: games_per_generation). Heuristic games are cheap, and the first model learns the game from them." minimum:"0"`
	Simulations        int            `json:"simulations,omitempty" doc:"MCTS simulations per move (default 64)." minimum:"0"`
	Search             string         `json:"search,omitempty" enum:"puct,gumbel" doc:"Root search: puct (AlphaZero's, default) or gumbel (Gumbel MuZero's sequential halving over the 16 moves the model and Gumbel noise favour: with a model's priors, strong with few simulations; games record its improved policy)."`
	EvalGames          int            `json:"eval_games,omitempty" doc:"Gauntlet games against each opponent, seats alternating (default 40)." minimum:"0"`
	MaxMoves           int            `json:"max_moves,omitempty" doc:"Move cap per game; 0: the board's cell count." minimum:"0"`
	SyncInterval       time.Duration  `json:"sync_interval,omitempty" doc:"How often a node uploads finished games, in ns (default 5s)." minimum:"0"`
	Parallel           int            `json:"parallel,omitempty" doc:"Games a node plays at once (default: the CPUs requested)." minimum:"0"`
	Quality            quality.Config `json:"quality,omitempty"`
	Bootstrap          string         `json:"bootstrap,omitempty" enum:"heuristic,rollouts" doc:"Who plays before a model exists: the heuristic player (default) or MCTS with random rollouts."`
	TrainWindow        int            `json:"train_window,omitempty" doc:"Train on the exports of this many recent generations (default 3)." minimum:"0"`
	TrainEpochs        int            `json:"train_epochs,omitempty" doc:"Passes over the training window (default 10)." minimum:"0"`
	PromoteScore       float64        `json:"promote_score,omitempty" doc:"Score against the current best a candidate needs to be promoted (default 0.55)." minimum:"0" maximum:"1"`
	ContinueEvery      int            `json:"continue_every,omitempty" doc:"Generations per workflow run before continue-as-new (default 5)." minimum:"0"`
	CPUs               float64        `json:"cpus,omitempty" doc:"CPUs a generation asks of its node (default 1)." minimum:"0"`
	GPUs               int            `json:"gpus,omitempty" minimum:"0"`
	MemoryMB           int64          `json:"memory_mb,omitempty" doc:"Memory a generation asks of its node (default 512)." minimum:"0"`
	Seed               uint64         `json:"seed,omitempty"`
	// Model, when set, makes the loop's model yours (usermodel.go).
	Model *ModelCommands `json:"model,omitempty" doc:"Your model instead of the built-in one: an evaluator command serving it to the search and a trainer command training the next candidate (docs/selfplay.md, \"Your model in the loop\")."`
}

// WithDefaults fills zero fields.
func (s Settings) WithDefaults() Settings {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&s.GamesPerGeneration, 1000)
	def(&s.BootstrapGames, s.GamesPerGeneration)
	if s.Bootstrap == "" {
		s.Bootstrap = "heuristic"
	}
	def(&s.Simulations, 64)
	if s.Search == "" {
		s.Search = SearchPUCT
	}
	def(&s.EvalGames, 40)
	def(&s.TrainWindow, 3)
	def(&s.TrainEpochs, 10)
	def(&s.ContinueEvery, 5)
	if s.SyncInterval == 0 {
		s.SyncInterval = 5 * time.Second
	}
	if s.PromoteScore == 0 {
		s.PromoteScore = 0.55
	}
	if s.CPUs == 0 {
		s.CPUs = 1
	}
	if s.MemoryMB == 0 {
		s.MemoryMB = 512
	}
	if s.Parallel == 0 {
		s.Parallel = max(1, int(s.CPUs))
		if s.Model != nil {
			// Searches mostly wait for the evaluator: more games at once
			// make its batches bigger, not the CPU busier.
			s.Parallel = defaultModelParallel
		}
	}
	if s.Model != nil {
		m := *s.Model
		if m.MaxBatch == 0 {
			m.MaxBatch = defaultMaxBatch
		}
		s.Model = &m
	}
	s.Quality = s.Quality.WithDefaults()
	return s
}

// FieldError names the setting that is wrong.
type FieldError struct{ Field, Reason string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Validate checks settings after WithDefaults.
func (s Settings) Validate() error {
	switch {
	case s.Generations < 0:
		return &FieldError{"generations", "must not be negative"}
	case s.GamesPerGeneration < s.Quality.MinGames:
		return &FieldError{"games_per_generation", fmt.Sprintf("%d games can never pass the quality gate's min_games %d", s.GamesPerGeneration, s.Quality.MinGames)}
	case s.BootstrapGames < s.Quality.MinGames:
		return &FieldError{"bootstrap_games", fmt.Sprintf("%d games can never pass the quality gate's min_games %d", s.BootstrapGames, s.Quality.MinGames)}
	case s.EvalGames < 2 || s.EvalGames%2 != 0:
		return &FieldError{"eval_games", "must be an even number ≥ 2 (seats alternate)"}
	case s.SyncInterval < 100*time.Millisecond:
		return &FieldError{"sync_interval", "must be at least 100ms"}
	case s.PromoteScore > 1 || s.PromoteScore < 0:
		return &FieldError{"promote_score", "must be in [0,1]"}
	case s.Bootstrap != "heuristic" && s.Bootstrap != "rollouts":
		return &FieldError{"bootstrap", "must be heuristic or rollouts"}
	case s.Search != SearchPUCT && s.Search != SearchGumbel:
		return &FieldError{"search", "must be puct or gumbel"}
	case s.Simulations > 100000:
		return &FieldError{"simulations", "at most 100000"}
	}
	if err := s.Quality.Validate(); err != nil {
		return &FieldError{"quality", err.Error()}
	}
	if s.Model != nil {
		return s.Model.validate()
	}
	return nil
}

// Input starts (or, with State, continues) a loop.
type Input struct {
	LoopID     string   `json:"loop_id"`
	Cluster    string   `json:"cluster"`
	Config     string   `json:"config"`
	GamePlugin string   `json:"game_plugin" doc:"sha256 of the game plugin."`
	Settings   Settings `json:"settings"`
	State      *State   `json:"state,omitempty"`
	// Queued: the loop runs the work items a queue populator sends it
	// (signal work) one at a time, each on its own allocation, instead of
	// whole generations.
	Queued bool `json:"queued,omitempty"`
}

// WorkItem is one piece of work a populator queues for a loop.
type WorkItem struct {
	ID     int       `json:"id"`
	Kind   string    `json:"kind" enum:"selfplay,training,tournament"`
	Queued time.Time `json:"queued"`
	Why    string    `json:"why,omitempty" doc:"Why the populator chose this kind."`
}

// WorkRecord is a work item run (or running).
type WorkRecord struct {
	WorkItem
	Started    time.Time  `json:"started"`
	Ended      *time.Time `json:"ended,omitempty"`
	Node       string     `json:"node,omitempty"`
	Generation int        `json:"generation"`
	Games      int        `json:"games,omitempty" doc:"Self-play games played."`
	Skipped    bool       `json:"skipped,omitempty" doc:"Nothing to do (no new export to train on, no candidate to rate)."`
	Result     string     `json:"result,omitempty"`
}

// GauntletScore of one gauntlet pairing, the candidate's view.
type GauntletScore struct {
	Opponent  string  `json:"opponent"`
	Wins      int     `json:"wins"`
	Draws     int     `json:"draws"`
	Losses    int     `json:"losses"`
	Score     float64 `json:"score" doc:"(wins + draws/2) / games."`
	EloBefore float64 `json:"elo_before"`
	EloAfter  float64 `json:"elo_after"`
}

// Generation is one turn of the loop.
type Generation struct {
	N       int        `json:"n"`
	State   string     `json:"state" enum:"selfplay,export,exported,train,trained,gauntlet,promoted,kept,rejected"`
	Reason  string     `json:"reason,omitempty"`
	Started time.Time  `json:"started"`
	Ended   *time.Time `json:"ended,omitempty"`
	Node    string     `json:"node,omitempty"`
	// Players: who played the self-play games ("heuristic" or
	// "mcts-rollouts" before a model exists, else "mcts:<model>").
	Players   string         `json:"players"`
	Games     int            `json:"games"`
	Attempts  int            `json:"attempts" doc:"Self-play activities run; more than one after a node was lost."`
	Resumed   []int          `json:"resumed,omitempty" doc:"Games already synced to S3 when each retry started."`
	EvalBatch float64        `json:"eval_batch,omitempty" doc:"Your model: mean positions per evaluator batch in self-play."`
	Quality   quality.Report `json:"quality"`
	Dataset   string         `json:"dataset,omitempty" doc:"S3 key of the .npz export."`
	Positions int            `json:"positions,omitempty"`
	Model     string         `json:"model,omitempty" doc:"The candidate trained this generation."`
	ModelKey  string         `json:"model_key,omitempty"`
	// TrainNode and GauntletNode: where those phases ran (Node is
	// self-play's); phased loops place each on its own.
	TrainNode    string          `json:"train_node,omitempty"`
	GauntletNode string          `json:"gauntlet_node,omitempty"`
	TrainLoss    float64         `json:"train_loss,omitempty"`
	Gauntlet     []GauntletScore `json:"gauntlet,omitempty"`
	Promoted     bool            `json:"promoted"`
	Elo          float64         `json:"elo,omitempty" doc:"The candidate's rating after the gauntlet."`
}

// State is the loop's live state (the query's answer).
type State struct {
	Phase       string       `json:"phase" enum:"allocating,selfplay,export,train,gauntlet,idle,stopped,finished,failed"`
	Reason      string       `json:"reason,omitempty"`
	Node        string       `json:"node,omitempty"`
	Generation  int          `json:"generation" doc:"Generations started so far."`
	Completed   int          `json:"completed" doc:"Generations finished (promoted, kept or rejected)."`
	TotalGames  int          `json:"total_games"`
	Failures    int          `json:"failures" doc:"Activities lost to node deaths and redone."`
	Drains      int          `json:"drains,omitempty" doc:"Activities moved off a draining node after syncing what they finished (not failures)."`
	Best        string       `json:"best,omitempty" doc:"The current best model."`
	BestKey     string       `json:"best_key,omitempty"`
	Datasets    []string     `json:"datasets,omitempty" doc:"The training window's .npz keys, oldest first."`
	Generations []Generation `json:"generations" doc:"The most recent generations, oldest first."`
	Elo         *elo.Table   `json:"elo"`
	// Durations: how long generations and their phases took (mean and
	// variance), for predictions (the seed's job-duration tracking).
	Durations map[string]*schedule.Durations `json:"durations,omitempty" doc:"Per phase (generation, selfplay, export, train, gauntlet): count, mean seconds, Welford M2."`
	// RunGenerations counts generations in this workflow run (for
	// continue-as-new).
	RunGenerations int `json:"-"`

	// A populator-driven loop (Input.Queued): its queue, the item running,
	// what it ran, and what the next items can do.
	Queued       bool           `json:"queued,omitempty" doc:"Driven by a queue populator."`
	Queue        []WorkItem     `json:"queue,omitempty" doc:"Work queued, next first."`
	Current      *WorkRecord    `json:"current,omitempty" doc:"The work item running."`
	Work         []WorkRecord   `json:"work,omitempty" doc:"Recent work items run, oldest first."`
	WorkDone     map[string]int `json:"work_done,omitempty" doc:"Work items run by kind (skipped ones excluded)."`
	Fresh        int            `json:"fresh,omitempty" doc:"Exports no training used yet."`
	Candidate    string         `json:"candidate,omitempty" doc:"The latest trained model, not rated yet; the next training continues from it."`
	CandidateKey string         `json:"candidate_key,omitempty"`
	LastWork     *time.Time     `json:"last_work,omitempty" doc:"When the last work item ended."`
}

// maxGenerations bounds the generations kept in the state.
const maxGenerations = 50
