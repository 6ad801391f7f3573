// Package learner is what every built-in learning algorithm implements and
// what the rest of the platform reads of one: a Learner that iterates,
// counts, saves and evaluates; a Factory that makes or restores one for a
// run; and Metrics, the numbers an iteration reports, with the common
// ones (iteration, timesteps, returns) as fields and the algorithm's own
// (PPO's policy_loss, DQN's epsilon) by name. No algorithm's config or
// metrics type is read outside its own package (docs/architecture.md).
package learner

import (
	"context"
	"io"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Learner trains one policy on its env. Not safe for concurrent use.
type Learner interface {
	// Iterate trains one iteration: the algorithm's unit of progress, a
	// checkpoint boundary (PPO: one rollout and its epochs; DQN: a fixed
	// number of env steps and their gradient steps).
	Iterate(ctx context.Context) (Metrics, error)
	// Counters are the iterations and env steps trained so far.
	Counters() (iteration, timesteps int64)
	// Save writes the learner's whole state: a Restore of it continues
	// exactly where this one would.
	Save(w io.Writer) error
	// Evaluate runs the deterministic (greedy) policy on env, reset with
	// seed, for about episodes episodes; the learner's own state is
	// untouched.
	Evaluate(ctx context.Context, env envs.VecEnv, seed uint64, episodes int) (EvalResult, error)
}

// Env is what a learner trains on.
type Env struct {
	// Train is the learner's own envs: stepped by it alone.
	Train envs.VecEnv
	// Open makes fresh envs of the same plugin (n instances, reset with
	// seed), for evaluations inside training; nil where none can be made.
	// The learner closes what it opens.
	Open func(ctx context.Context, n int, seed uint64) (envs.VecEnv, error)
}

// Knobs are the run spec's fields a built-in learner reads.
type Knobs struct {
	Seed uint64
	// Workers is how many goroutines the learner may compute with.
	Workers int
	// EpisodeLength and BatchSize are the seed-000 knobs (EPISODE_LENGTH,
	// BATCH_SIZE): env steps per env per iteration and the minibatch
	// size; 0 keeps the algorithm's default.
	EpisodeLength, BatchSize int
	// Hyperparameters override the algorithm's config fields by their
	// JSON names (Overlay); errors name hyperparameters.<field>.
	Hyperparameters map[string]any
	// MultiAgent is a multi-agent run's policies and mapping (nil: one
	// policy shared by every agent of a multi-agent env).
	MultiAgent *MultiAgent
	// Imports are the learner checkpoints (FileLearner) of the earlier
	// runs a multi-agent run's policies are frozen from (Policy.Checkpoint),
	// by policy: the platform reads them before New.
	Imports map[string][]byte `json:"-"`
}

// Factory makes and restores one algorithm's learner. It is registered
// with the algorithm (training.Algorithm.Learner).
type Factory interface {
	// Config is the learner's configuration for a run on envName ("":
	// an env without tuned defaults): the algorithm's defaults, the
	// knobs, then the hyper-parameters; a *FieldError names a bad field.
	// Submission checks it; sweeps read its JSON names and values.
	Config(envName string, k Knobs) (any, error)
	// New makes a fresh learner on env for the knobs, from the
	// algorithm's tuned defaults for env's name.
	New(env Env, k Knobs) (Learner, error)
	// Restore continues a learner Save wrote, on env.
	Restore(r io.Reader, env Env) (Learner, error)
}

// SpaceChecker is what a Factory implements when it trains only some
// envs (DQN: discrete actions): submission asks it with the env plugin's
// declared spaces, so a run it cannot train is refused before it starts.
// A *FieldError names the field at fault (env).
type SpaceChecker interface {
	CheckSpaces(obs, act envs.Space) error
}

// EnvChecker is what a Factory implements to check, at submission, a run
// against its env's spec beyond the spaces: a multi-agent run's policies
// and mapping against the env's agents. A Factory without it trains no
// multi-agent env.
type EnvChecker interface {
	CheckEnv(spec envs.Spec, k Knobs) error
}

// Importer is what a Factory implements to take a multi-agent run's
// policies frozen from earlier runs' checkpoints (Policy.Checkpoint):
// submission asks it whether data, an earlier run's learner checkpoint,
// holds a policy (want; "" the default) that self can be on env.
type Importer interface {
	CheckImport(data []byte, env envs.Spec, self, want string) error
}

// EvalResult summarises deterministic evaluation episodes.
type EvalResult struct {
	Episodes   int     `json:"episodes"`
	ReturnMean float64 `json:"return_mean"`
	ReturnMin  float64 `json:"return_min"`
	ReturnMax  float64 `json:"return_max"`
}

// FieldError names the offending field of a run spec.
type FieldError struct {
	Field, Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }
