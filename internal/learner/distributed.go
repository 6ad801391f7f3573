package learner

import (
	"context"
	"io"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Distributor is what a Factory implements to train from rollout workers
// (a run's rollout_workers > 0): a Trainer that steps no env and learns
// from the fragments Actors on other nodes collect with the weights it
// publishes. The platform carries weights and fragments as opaque bytes
// (internal/training's rollout bus); only the algorithm reads them.
type Distributor interface {
	// NewTrainer is a fresh trainer for numEnvs env slots in all (every
	// worker's together, in worker order), on env spec.
	NewTrainer(spec envs.Spec, numEnvs int, k Knobs) (Trainer, error)
	// RestoreTrainer continues a trainer's checkpoint (its Save).
	RestoreTrainer(r io.Reader, spec envs.Spec, numEnvs int) (Trainer, error)
	// NewActor is one rollout worker on env; k.Seed is the worker's own.
	NewActor(env envs.VecEnv, k Knobs) (Actor, error)
}

// Trainer is a Learner whose Iterate is Learn: it checkpoints, counts and
// evaluates like any other.
type Trainer interface {
	Learner
	// Weights is the current policy version (version: iterations so far).
	Weights() ([]byte, error)
	// Learn trains one iteration on every worker's fragment of it, in
	// worker order.
	Learn(ctx context.Context, frags [][]byte) (Metrics, error)
}

// Actor acts for a trainer: one iteration's rollout per Collect.
type Actor interface {
	// Collect acts one iteration with weights (a Trainer's Weights) and
	// returns the fragment and the env steps it took. The envs and
	// unfinished episodes carry over to the next Collect.
	Collect(ctx context.Context, weights []byte, worker int, node string) (fragment []byte, steps int64, err error)
}
