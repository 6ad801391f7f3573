// Package training runs the built-in learner on a node: a run spec (what
// users submit), its mapping onto PPO's hyper-parameters, and the segment
// runner that restores a run from its latest checkpoint in S3, trains a
// few iterations on a WASM env and checkpoints again. Temporal glue lives
// in workflows/train; this package has no workflow code.
package training

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/names"
	"github.com/trainyard/trainyard/internal/workspec"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Algorithms: the built-in learner, or a user's own trainer process.
const (
	AlgorithmPPO     = "ppo"
	AlgorithmCommand = "command"
	// AlgorithmLLM is what WithDefaults sets for kind llm: the trainer is
	// the loop's (a command on the batch protocol, or a remote API).
	AlgorithmLLM = "llm"
)

// Run kinds.
const (
	KindTraining = "training"
	KindLLM      = "llm"
)

// Spec is one training run as submitted. The seed-000 knobs map onto
// Workers (RAY_WORKERS), EnvsPerWorker (ENVS_PER_WORKER), EpisodeLength
// (EPISODE_LENGTH: env steps per instance per iteration) and BatchSize
// (BATCH_SIZE: the minibatch size).
type Spec struct {
	// Kind llm is the LLM-RL loop (loop.go): rollout workers, a
	// trajectory pool, a trainer and weight sync.
	Kind    string `json:"kind,omitempty" enum:"training,llm" doc:"training (the default) or llm: the LLM-RL loop of rollout workers that put an inference endpoint's episodes in a trajectory pool, a trainer that learns from its batches, and weight sync back to the endpoints (llm section; docs/llm.md)."`
	Name    string `json:"name,omitempty" doc:"A label for people; the run id is generated."`
	Cluster string `json:"cluster" doc:"Cluster whose nodes run it."`
	Env     string `json:"env,omitempty" doc:"Env plugin: sha256, name@version or name (required for ppo)."`
	Reward  string `json:"reward,omitempty" doc:"Optional reward-shaping plugin applied on top of the env's reward."`
	// Algorithm names a registered Algorithm (algorithm.go): "ppo" (the
	// built-in learner), "command" (Command, a bring-your-own trainer such
	// as a PyTorch script), ...; no enum here, the registry is the list.
	Algorithm string   `json:"algorithm,omitempty" maxLength:"63" doc:"A registered algorithm (GET /v1/algorithms): ppo (built-in learner, default), reinforce (the built-in learner as a REINFORCE baseline) or command (run command as the trainer); llm is set by kind llm."`
	Command   []string `json:"command,omitempty" maxItems:"256" doc:"Bring-your-own trainer: argv run on the node with its GPUs (CUDA_VISIBLE_DEVICES), a minimal environment and TRAINYARD_CHECKPOINT_DIR, synced to S3 and restored before any restart; its exit status decides the run."`
	GPUs      int      `json:"gpus,omitempty" minimum:"0" maximum:"64" doc:"GPUs the trainer gets (command runs; per node with nodes > 1)."`
	// Nodes > 1 runs Command as that many processes, one per node, placed
	// as one gang (STRICT_SPREAD) with torch.distributed's variables.
	Nodes int `json:"nodes,omitempty" minimum:"0" maximum:"64" doc:"Command runs: this many trainer processes, one per node, placed as one gang (all or nothing, one per node) with MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK and NODE_RANK set; if one dies, all restart from the last synced checkpoint on a fresh placement. Default 1."`
	// InfeasibleGrace: how long the run waits, when no node could ever
	// hold it (its node left), for the cluster to change before failing.
	InfeasibleGrace string `json:"infeasible_grace,omitempty" maxLength:"20" doc:"How long a run no node of the cluster could ever hold waits for a node that fits to join before it fails (e.g. 5m, the default)."`
	// SyncEverySeconds: how often a command's checkpoint dir is synced.
	SyncEverySeconds int `json:"sync_every_seconds,omitempty" minimum:"0" doc:"Seconds between syncs of a command's checkpoint dir to S3 (default 30; also at exit)."`
	Workers          int `json:"workers,omitempty" minimum:"0" maximum:"64" doc:"Worker threads on the trainer node (RAY_WORKERS); default 1."`
	EnvsPerWorker    int `json:"envs_per_worker,omitempty" minimum:"0" maximum:"4096" doc:"Env instances per worker (ENVS_PER_WORKER); default 8."`
	EpisodeLength    int `json:"episode_length,omitempty" minimum:"0" doc:"Env steps per instance per iteration (EPISODE_LENGTH); default from the env's tuned config."`
	BatchSize        int `json:"batch_size,omitempty" minimum:"0" doc:"Minibatch size (BATCH_SIZE); default from the env's tuned config."`
	// RolloutWorkers > 0 is the distributed mode: that many rollout-worker
	// activities (0 GPUs, RolloutCPUs each, placed like the trainer) step
	// EnvsPerWorker envs each and hand their rollouts to the trainer
	// through S3; 0 steps the envs inside the trainer (the default).
	RolloutWorkers int     `json:"rollout_workers,omitempty" minimum:"0" maximum:"64" doc:"Distributed rollouts: this many rollout workers (0 GPUs, rollout_cpus each) on the cluster's nodes step envs_per_worker envs each and exchange weights and rollouts with the trainer through S3 (docs/training.md). 0, the default: the trainer steps workers × envs_per_worker envs itself."`
	RolloutCPUs    float64 `json:"rollout_cpus,omitempty" minimum:"0" doc:"CPUs each rollout worker reserves (default 1)."`
	// Hyperparameters override the algorithm's learner config by its
	// JSON names (learner.Overlay).
	Hyperparameters map[string]any `json:"hyperparameters,omitempty" doc:"Overrides of the algorithm's hyper-parameters by name (GET /v1/algorithms lists them with their defaults): ppo's learning_rate, gamma, gae_lambda, epochs, clip_coef, entropy_coef, hidden, normalize_obs, ...; dqn's buffer_size, learning_starts, train_freq, exploration_fraction, ...)."`
	// Policies, PolicyMapping, PoliciesToTrain and League are a
	// multi-agent run's (learner.MultiAgent; docs/training.md "Multi-agent
	// runs").
	Policies        map[string]learner.Policy `json:"policies,omitempty" doc:"Multi-agent envs: the run's policies by name, each a network with its own hyper-parameters over the run's, or a fixed script (tit_for_tat). Default: one policy, shared, for every agent."`
	PolicyMapping   map[string]string         `json:"policy_mapping,omitempty" doc:"Multi-agent envs: agent name or pattern (agent_*) → policy; an agent's own name wins over patterns, a more literal pattern over a less literal one. Required with more than one policy."`
	PoliciesToTrain []string                  `json:"policies_to_train,omitempty" maxItems:"64" doc:"Multi-agent envs: the policies that learn; the others stay frozen. Default: every policy that is not a script, a checkpoint or a league member."`
	League          map[string][]string       `json:"league,omitempty" doc:"Multi-agent envs: agent name or pattern → the frozen policies it plays, one drawn at the start of each of its episodes (a league of opponents). A league member plays only there and never trains; policy_mapping need not name the agent."`
	Iterations      int                       `json:"iterations,omitempty" minimum:"0" doc:"Stop after this many iterations (default 500)."`
	TargetReturn    *float64                  `json:"target_return,omitempty" doc:"Stop as soon as the mean return of the last 100 episodes reaches this."`
	CheckpointEvery int                       `json:"checkpoint_every,omitempty" minimum:"0" doc:"Iterations between checkpoints (default 10)."`
	KeepCheckpoints int                       `json:"keep_checkpoints,omitempty" minimum:"0" doc:"Checkpoints kept besides the best one (default 3)."`
	Seed            uint64                    `json:"seed,omitempty" doc:"Seeds weights, envs and sampling; a run is reproducible given it."`
	CPUs            float64                   `json:"cpus,omitempty" minimum:"0" doc:"CPUs the trainer reserves (default: workers)."`
	MemoryMB        int64                     `json:"memory_mb,omitempty" minimum:"0" doc:"Memory the trainer reserves (default 512)."`
	Priority        int                       `json:"priority,omitempty" doc:"Higher places first among waiting work (plus the starvation boost once it has waited past the policy's threshold)."`
	// Config is the quota key (a game config such as hexagonal_2p):
	// config quotas, one training per config, board→VRAM routing.
	Config string `json:"config,omitempty" maxLength:"63" doc:"Quota key, e.g. a game config (hexagonal_2p): config quotas, one training per config and its board's VRAM floor apply (docs/scheduling.md)."`
	// Capabilities are granted to the run's plugins, never ambient
	// (docs/plugin-abi.md §8).
	Capabilities *Capabilities `json:"capabilities,omitempty" doc:"Capabilities granted to the run's plugins; nothing is ambient (docs/plugin-abi.md §8)."`
	// LLM configures a kind llm run.
	LLM *Loop `json:"llm,omitempty" doc:"Kind llm: the loop's pool, trainer steps and weight sync (docs/llm.md)."`
}

// Capabilities a run grants to its plugins.
type Capabilities struct {
	HTTP     []string `json:"http,omitempty" maxItems:"16" doc:"Inference endpoints of the cluster the env plugin may call by name (it must also declare http:<name> in its metadata)."`
	HTTPRate float64  `json:"http_rate,omitempty" minimum:"0" doc:"Requests per second for the whole run across all plugin instances (0: unlimited, unless the cluster's policy caps it)."`
	// HTTPBurst is the token bucket size (default: the rate rounded up).
	HTTPBurst int `json:"http_burst,omitempty" minimum:"0" doc:"Requests allowed at once above the rate (default: the rate rounded up, at least 1)."`
}

// FieldError names the offending field of a spec.
type FieldError = learner.FieldError

// WithDefaults fills unset knobs. A spec is defaulted once, where it is
// made (the API's submission, `run train --local`, a sweep's trial); the run
// workflow and the agents take it as it is (Defaulted).
func (s Spec) WithDefaults() Spec {
	if s.Kind == KindLLM {
		s = s.loopDefaults()
	}
	if s.Algorithm == "" {
		s.Algorithm = AlgorithmPPO
	}
	if s.Workers == 0 {
		s.Workers = 1
	}
	if s.EnvsPerWorker == 0 {
		s.EnvsPerWorker = 8
	}
	if s.Iterations == 0 {
		s.Iterations = 500
	}
	if s.CheckpointEvery == 0 {
		s.CheckpointEvery = 10
	}
	if s.KeepCheckpoints == 0 {
		s.KeepCheckpoints = 3
	}
	if s.CPUs == 0 {
		s.CPUs = float64(s.Workers)
	}
	if s.MemoryMB == 0 {
		s.MemoryMB = 512
	}
	if s.SyncEverySeconds == 0 {
		s.SyncEverySeconds = 30
	}
	if s.RolloutWorkers > 0 && s.RolloutCPUs == 0 {
		s.RolloutCPUs = 1
	}
	if a, ok := LookupAlgorithm(s.Algorithm); ok && a.Defaults != nil {
		a.Defaults(&s)
	}
	return s
}

// Defaulted refuses a spec that did not go through WithDefaults, for the
// agents' runners: a spec built in code and passed on undefaulted is a
// bug to surface, not something to default again far from where it was
// made (a zero sync interval would stop a command trainer's ticker).
func (s Spec) Defaulted() error {
	if !reflect.DeepEqual(s, s.WithDefaults()) {
		return fmt.Errorf("the run spec was not defaulted where it was made (Spec.WithDefaults): %w", ErrFatal)
	}
	return nil
}

// Validate checks what can be checked without the env plugin; every
// problem is a *FieldError, joined.
// Grace is InfeasibleGrace parsed; 0 when unset (the workflow's default).
func (s Spec) Grace() (time.Duration, error) {
	if s.InfeasibleGrace == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s.InfeasibleGrace)
	if err != nil || d <= 0 || d > 7*24*time.Hour {
		return 0, fmt.Errorf("%q: want a duration like 30s, 5m or 2h (at most 168h)", s.InfeasibleGrace)
	}
	return d, nil
}

func (s Spec) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, &FieldError{Field: field, Reason: fmt.Sprintf(format, a...)})
	}
	if s.Cluster == "" {
		bad("cluster", "required")
	} else if err := names.Cluster.Check(s.Cluster); err != nil {
		bad("cluster", "%v", err)
	}
	if err := names.Label.Check(s.Name); err != nil {
		bad("name", "%v", err)
	}
	switch {
	case s.Kind == KindLLM:
		errs = append(errs, s.validateLoop()...)
	case s.Kind != "" && s.Kind != KindTraining:
		bad("kind", "%q is not a run kind (%q or %q)", s.Kind, KindTraining, KindLLM)
	case s.LLM != nil:
		bad("llm", "belongs to kind %q", KindLLM)
	}
	if a, ok := LookupAlgorithm(s.Algorithm); !ok {
		bad("algorithm", "%q is not an algorithm (%s)", s.Algorithm, selectable())
	} else if a.Validate != nil {
		a.Validate(s, bad)
	}
	if _, err := s.Grace(); err != nil {
		bad("infeasible_grace", "%v", err)
	}
	if s.Workers < 1 || s.Workers > 64 {
		bad("workers", "must be 1..64, got %d", s.Workers)
	}
	if s.EnvsPerWorker < 1 || s.EnvsPerWorker > 4096 {
		bad("envs_per_worker", "must be 1..4096, got %d", s.EnvsPerWorker)
	}
	if s.EpisodeLength < 0 || s.BatchSize < 0 || s.Iterations < 1 || s.CheckpointEvery < 1 || s.KeepCheckpoints < 1 {
		bad("iterations", "episode_length and batch_size must be ≥ 0; iterations, checkpoint_every and keep_checkpoints ≥ 1")
	}
	if s.TargetReturn != nil && (math.IsNaN(*s.TargetReturn) || math.IsInf(*s.TargetReturn, 0)) {
		bad("target_return", "must be finite")
	}
	if s.RolloutWorkers < 0 || s.RolloutWorkers > 64 {
		bad("rollout_workers", "must be 0..64, got %d", s.RolloutWorkers)
	}
	if s.RolloutCPUs < 0 || math.IsNaN(s.RolloutCPUs) || math.IsInf(s.RolloutCPUs, 0) || (s.RolloutWorkers > 0 && s.RolloutCPUs == 0) {
		bad("rollout_cpus", "must be positive, got %v", s.RolloutCPUs)
	}
	if s.CPUs <= 0 || s.MemoryMB <= 0 {
		bad("cpus", "cpus and memory_mb must be positive")
	}
	if c := s.Capabilities; c != nil {
		seen := map[string]bool{}
		for i, name := range c.HTTP {
			if names.Endpoint.Check(name) != nil || seen[name] {
				bad(fmt.Sprintf("capabilities.http[%d]", i), "%q: want a distinct endpoint name (%s)", name, names.Endpoint.Rule())
			}
			seen[name] = true
		}
		if len(c.HTTP) > 16 {
			bad("capabilities.http", "%d endpoints, at most 16", len(c.HTTP))
		}
		if c.HTTPRate < 0 || math.IsNaN(c.HTTPRate) || math.IsInf(c.HTTPRate, 0) || c.HTTPBurst < 0 {
			bad("capabilities.http_rate", "http_rate must be finite and ≥ 0, http_burst ≥ 0")
		}
		if len(c.HTTP) == 0 && (c.HTTPRate > 0 || c.HTTPBurst > 0) {
			bad("capabilities.http", "http_rate and http_burst need endpoints in http")
		}
	}
	if !s.Shape().Learns() {
		return errors.Join(errs...)
	}
	if _, err := s.LearnerConfig(""); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			errs = append(errs, fe)
		}
	}
	return errors.Join(errs...)
}

// Knobs are what the spec sets of the built-in learner's config.
func (s Spec) Knobs() learner.Knobs {
	k := learner.Knobs{Seed: s.Seed, Workers: s.Workers, EpisodeLength: s.EpisodeLength, BatchSize: s.BatchSize, Hyperparameters: s.Hyperparameters}
	if len(s.Policies) > 0 || len(s.PolicyMapping) > 0 || s.PoliciesToTrain != nil || len(s.League) > 0 {
		k.MultiAgent = &learner.MultiAgent{Policies: s.Policies, Mapping: s.PolicyMapping, Train: s.PoliciesToTrain, League: s.League}
	}
	return k
}

// factory is the spec's algorithm's learner factory (ShapeSegments).
func (s Spec) factory() (learner.Factory, error) {
	a, ok := LookupAlgorithm(s.Algorithm)
	if !ok || a.Learner == nil {
		return nil, &FieldError{Field: "algorithm", Reason: fmt.Sprintf("%q has no built-in learner", s.Algorithm)}
	}
	return a.Learner, nil
}

// LearnerConfig is the algorithm's learner config for a run on envName
// (ShapeSegments; "": an env without tuned defaults).
func (s Spec) LearnerConfig(envName string) (any, error) {
	f, err := s.factory()
	if err != nil {
		return nil, err
	}
	return f.Config(envName, s.Knobs())
}

// CheckEnv refuses an env the algorithm's learner cannot train (DQN:
// continuous actions), and a multi-agent env (spec.Agents) that the
// learner or the run's shape does not fit; errors name the field.
func (s Spec) CheckEnv(spec envs.Spec) error {
	f, err := s.factory()
	if err != nil {
		return err
	}
	if c, ok := f.(learner.SpaceChecker); ok {
		if err := c.CheckSpaces(spec.Observation, spec.Action); err != nil {
			return err
		}
	}
	if !spec.MultiAgent() {
		_, err := s.Knobs().MultiAgent.Resolve(nil)
		return err
	}
	c, ok := f.(learner.EnvChecker)
	switch {
	case !ok:
		return &FieldError{Field: "env", Reason: fmt.Sprintf("%s is a multi-agent env (agents %v); %s trains single-agent envs", spec.Name, spec.Agents, s.Algorithm)}
	case s.Distributed() && s.EnvsPerWorker%len(spec.Agents) != 0:
		k := s.EnvsPerWorker + len(spec.Agents) - s.EnvsPerWorker%len(spec.Agents)
		return &FieldError{Field: "envs_per_worker", Reason: fmt.Sprintf("each rollout worker steps envs_per_worker = %d slots, not a whole number of %s games of %d agents (envs_per_worker %d is)", s.EnvsPerWorker, spec.Name, len(spec.Agents), k)}
	case !s.Distributed() && s.NumEnvs()%len(spec.Agents) != 0:
		k := s.EnvsPerWorker + 1
		for s.Workers*k%len(spec.Agents) != 0 {
			k++
		}
		return &FieldError{Field: "envs_per_worker", Reason: fmt.Sprintf("workers × envs_per_worker = %d slots is not a whole number of %s games of %d agents (envs_per_worker %d is)", s.NumEnvs(), spec.Name, len(spec.Agents), k)}
	}
	return c.CheckEnv(spec, s.Knobs())
}

// NumEnvs is the number of env instances the trainer steps.
func (s Spec) NumEnvs() int { return s.Workers * s.EnvsPerWorker }

// Distributed reports the distributed-rollout mode (rollout_workers > 0).
func (s Spec) Distributed() bool { return s.RolloutWorkers > 0 }

// LearnerEnvs is how many envs one iteration's rollout spans: the
// trainer's own (NumEnvs), or every rollout worker's together.
func (s Spec) LearnerEnvs() int {
	if s.Distributed() {
		return s.RolloutWorkers * s.EnvsPerWorker
	}
	return s.NumEnvs()
}

// WorkSpec is what admission and placement see: one trainer that runs its
// rollout workers in-process (the built-in learner needs no GPU; a command
// gets the GPUs it asks for).
// With rollout_workers, the rollout workers are a role of their own.
func (s Spec) WorkSpec(id string) workspec.Spec { return s.RunWork(id, workspec.KindTraining) }

// RunGroup is the colocation group of a distributed run's roles.
const RunGroup = "run"

// RunWork is the whole run's work description (kind training, or
// sweep-trial): with rollout_workers, the trainer and its rollout workers
// are one gang, spread over as many nodes as fit (a node's death then
// costs fewer roles).
func (s Spec) RunWork(id, kind string) workspec.Spec {
	ws := s.TrainerWork(id, kind)
	if s.Distributed() {
		ws.Roles = append(ws.Roles, workspec.Role{Name: workspec.RoleRolloutWorker, Count: s.RolloutWorkers, CPUs: s.RolloutCPUs, MemoryMB: s.MemoryMB})
		for i := range ws.Roles {
			ws.Roles[i].Group = RunGroup
		}
		ws.Groups = []workspec.Group{{Name: RunGroup, Strategy: workspec.Spread}}
	}
	return ws
}

// TrainerWork is the work description of the trainer alone (kind
// training, or sweep-trial for a sweep's trials).
func (s Spec) TrainerWork(id, kind string) workspec.Spec {
	ws := workspec.Spec{
		Name: id, Kind: kind, Priority: s.Priority, Config: s.Config,
		Roles: []workspec.Role{{Name: workspec.RoleTrainer, Count: s.Ranks(), CPUs: s.CPUs, GPUs: float64(s.GPUs), MemoryMB: s.MemoryMB}},
	}
	if s.Ranks() > 1 {
		// One rank per node: torch.distributed's ranks are processes of
		// their own, each with the node's GPUs it was given.
		ws.Roles[0].Group = RunGroup
		ws.Groups = []workspec.Group{{Name: RunGroup, Strategy: workspec.StrictSpread}}
	}
	return ws
}

// Ranks is how many trainer processes a command run has (Nodes, at
// least 1).
func (s Spec) Ranks() int {
	if s.Shape().Process() && s.Nodes > 1 {
		return s.Nodes
	}
	return 1
}

// RolloutWork is the work description of one rollout worker of run id.
func (s Spec) RolloutWork(id string) workspec.Spec {
	return workspec.Spec{
		Name: id, Kind: workspec.KindRollout, Priority: s.Priority, Config: s.Config,
		Roles: []workspec.Role{{Name: workspec.RoleRolloutWorker, Count: 1, CPUs: s.RolloutCPUs, MemoryMB: s.MemoryMB}},
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if k != "seed" && k != "workers" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
