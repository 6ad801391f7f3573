package training

import (
	"fmt"

	"github.com/trainyard/trainyard/internal/names"
	"github.com/trainyard/trainyard/internal/trajpool"
)

// Loop is the llm section of a kind llm run: seed 003's loop. Rollout
// workers (rollout_workers of them, rollout_cpus each, no GPU) play the env
// plugin, whose steps call the granted inference endpoints, max_concurrency
// episodes at a time each; finished episodes go to a trajectory pool on the
// trainer's node; the trainer (command, on the run's gpus, or a remote
// training API) takes batches and writes weights; every sync_every steps
// they become a checkpoint in S3 and each granted endpoint is told to load
// them (by its type: webhook, vllm, sglang, reload command).
type Loop struct {
	MaxConcurrency int    `json:"max_concurrency,omitempty" minimum:"0" maximum:"10000" doc:"Episodes each rollout worker plays at once, mostly waiting on the endpoint (default 100)."`
	Steps          int64  `json:"steps" minimum:"1" doc:"Trainer steps the loop runs; it succeeds after the last one is published."`
	Batch          int    `json:"batch,omitempty" minimum:"0" maximum:"65536" doc:"Trajectories per trainer step (default 32)."`
	PoolCapacity   int    `json:"pool_capacity,omitempty" minimum:"0" maximum:"1048576" doc:"Trajectories the pool holds (default 4 batches)."`
	PoolPolicy     string `json:"pool_policy,omitempty" enum:"block,drop_oldest" doc:"When the pool is full: block (rollout workers wait: back-pressure, the default) or drop_oldest (the oldest trajectory is discarded)."`
	MaxLag         int64  `json:"max_lag,omitempty" minimum:"0" doc:"Most off-policy lag (the trainer's weight version minus the one a trajectory was generated with) a batch takes; older trajectories are discarded. 0: no limit."`
	SyncEvery      int64  `json:"sync_every,omitempty" minimum:"0" doc:"Publish the weights every this many trainer steps (default 1): a checkpoint in S3, then each granted endpoint is told to load it, by its type."`
	// Remote is the trainer when the run has no command.
	Remote *RemoteTrainer `json:"remote,omitempty" doc:"A remote training API as the trainer, instead of command."`
}

// RemoteTrainer is a training service the agent posts each batch to. The
// run only names it: its URL and credentials are an endpoint of type
// trainer that the cluster's spec declares (an admin's), so a run cannot
// choose where an agent's secrets are sent, nor which secret.
type RemoteTrainer struct {
	Endpoint string `json:"endpoint" maxLength:"63" doc:"An endpoint of type trainer that the run's cluster declares (its spec binds the URL to the credentials); each batch is POSTed there."`
}

func (s Spec) loopDefaults() Spec {
	s.Algorithm = AlgorithmLLM
	if s.RolloutWorkers == 0 {
		s.RolloutWorkers = 1
	}
	if s.LLM == nil {
		return s
	}
	l := *s.LLM
	if l.MaxConcurrency == 0 {
		l.MaxConcurrency = 100
	}
	if l.Batch == 0 {
		l.Batch = 32
	}
	if l.PoolCapacity == 0 {
		l.PoolCapacity = 4 * l.Batch
	}
	if l.PoolPolicy == "" {
		l.PoolPolicy = string(trajpool.Block)
	}
	if l.SyncEvery == 0 {
		l.SyncEvery = 1
	}
	s.LLM = &l
	return s
}

// validateLoop checks a kind llm spec (after WithDefaults).
func (s Spec) validateLoop() []error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, &FieldError{Field: field, Reason: fmt.Sprintf(format, a...)})
	}
	if s.Env == "" {
		bad("env", "required for kind llm: the env plugin whose steps call the endpoint")
	}
	if s.Capabilities == nil || len(s.Capabilities.HTTP) == 0 {
		bad("capabilities.http", "kind llm needs the endpoints its env calls and its weights go to")
	}
	if s.Nodes > 1 || s.Reward != "" {
		bad("nodes", "nodes and reward do not apply to kind llm")
	}
	l := s.LLM
	if l == nil {
		bad("llm", "required for kind llm: at least steps")
		return errs
	}
	if l.Steps < 1 {
		bad("llm.steps", "must be ≥ 1, got %d", l.Steps)
	}
	if l.MaxConcurrency < 1 || l.MaxConcurrency > 10000 {
		bad("llm.max_concurrency", "must be 1..10000, got %d", l.MaxConcurrency)
	}
	if l.Batch < 1 || l.Batch > 65536 {
		bad("llm.batch", "must be 1..65536, got %d", l.Batch)
	}
	if l.PoolCapacity < l.Batch || l.PoolCapacity > 1<<20 {
		bad("llm.pool_capacity", "must hold a batch (%d) and at most 1048576, got %d", l.Batch, l.PoolCapacity)
	}
	if p := trajpool.Policy(l.PoolPolicy); p != trajpool.Block && p != trajpool.DropOldest {
		bad("llm.pool_policy", "%q: want block or drop_oldest", l.PoolPolicy)
	}
	if l.MaxLag < 0 || l.SyncEvery < 1 {
		bad("llm.max_lag", "max_lag must be ≥ 0 and sync_every ≥ 1")
	}
	switch {
	case l.Remote == nil && len(s.Command) == 0:
		bad("command", "kind llm needs a trainer: command (a process on the batch protocol) or llm.remote")
	case l.Remote != nil && len(s.Command) > 0:
		bad("llm.remote", "give command or llm.remote, not both")
	case l.Remote != nil:
		if names.Endpoint.Check(l.Remote.Endpoint) != nil {
			bad("llm.remote.endpoint", "%q: want the name of an endpoint of type trainer that the cluster declares", l.Remote.Endpoint)
		}
	case s.Command[0] == "":
		bad("command", "the trainer's argv must start with a program")
	}
	if s.GPUs < 0 || s.GPUs > 64 {
		bad("gpus", "must be 0..64, got %d", s.GPUs)
	}
	return errs
}
