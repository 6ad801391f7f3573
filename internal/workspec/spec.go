// Package workspec is the description of a piece of work Trainyard admits
// and places: its roles (rollout workers, trainer, trajectory pool, ...) with
// per-instance resources, how roles group onto nodes, and the preferences the
// scheduler scores by. It is plain data: parsing, env overrides and
// validation, no scheduling.
package workspec

import (
	"bytes"
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"
)

// Work kinds; policies key their rules on them.
const (
	KindTraining   = "training"
	KindSelfPlay   = "selfplay"
	KindEvaluation = "evaluation"
	KindRollout    = "rollout" // CPU-only RL rollouts (seed 000)
	KindJob        = "job"     // a plain command
	KindSweepTrial = "sweep-trial"
)

// Kinds lists the valid work kinds.
var Kinds = []string{KindTraining, KindSelfPlay, KindEvaluation, KindRollout, KindJob, KindSweepTrial}

// Trains says whether work of a kind trains a model: it never lands on an
// ephemeral node (a lost node loses its learning).
func Trains(kind string) bool { return kind == KindTraining || kind == KindSweepTrial }

// Well-known role names (seed 003 plus evaluator and self-play). Others are
// allowed; these are the ones policies name.
const (
	RoleRolloutWorker  = "rollout_worker"
	RoleTrainer        = "trainer"
	RoleTrajectoryPool = "trajectory_pool"
	RoleDataLoader     = "data_loader"
	RoleWeightSync     = "weight_sync"
	RoleValidator      = "validator"
	RoleEvaluator      = "evaluator"
	RoleSelfPlay       = "selfplay"
)

// Strategy says how the members of a colocation group spread over nodes,
// with Ray placement-group meaning: STRICT_* fail unless satisfied exactly,
// the others are best effort. Every group is all-or-nothing.
type Strategy string

// Placement strategies.
const (
	Pack         Strategy = "PACK"          // as few nodes as possible
	Spread       Strategy = "SPREAD"        // as many nodes as possible
	StrictPack   Strategy = "STRICT_PACK"   // all on one node
	StrictSpread Strategy = "STRICT_SPREAD" // every member on its own node
)

// Strategies lists the valid strategies.
var Strategies = []Strategy{Pack, Spread, StrictPack, StrictSpread}

// Spec is one submission.
type Spec struct {
	// Name and Kind may be left out of a job submission (required:false
	// for the API's schema): the job id and "job" fill them.
	Name string `json:"name" yaml:"name" required:"false"`
	Kind string `json:"kind" yaml:"kind" required:"false"`
	// Config is the game configuration (hexagonal_4p, square8_2p, zelda);
	// quotas and one-training-per-config key on it.
	Config string `json:"config,omitempty" yaml:"config,omitempty"`
	// Board overrides the board derived from Config (its prefix).
	Board    string `json:"board,omitempty" yaml:"board,omitempty"`
	Priority int    `json:"priority,omitempty" yaml:"priority,omitempty"`
	Roles    []Role `json:"roles" yaml:"roles"`
	// Groups give colocation groups their strategy; a group named by a role
	// but not listed here is PACK.
	Groups      []Group     `json:"groups,omitempty" yaml:"groups,omitempty"`
	Providers   Providers   `json:"providers,omitempty" yaml:"providers,omitempty"`
	Tiers       []int       `json:"tiers,omitempty" yaml:"tiers,omitempty"` // preferred GPU tiers, best first
	Rollout     Rollout     `json:"rollout,omitempty" yaml:"rollout,omitempty"`
	Environment Environment `json:"env,omitempty" yaml:"env,omitempty"`
}

// Role is one kind of process and how many instances run.
type Role struct {
	Name  string  `json:"name" yaml:"name"`
	Count int     `json:"count" yaml:"count" required:"false" doc:"Instances (default 1)."`
	CPUs  float64 `json:"cpus" yaml:"cpus" required:"false"`
	// GPUs per instance; a fraction below 1 shares one device (0.25 → four
	// instances per GPU), above 1 it must be whole.
	GPUs     float64 `json:"gpus,omitempty" yaml:"gpus,omitempty"`
	MemoryMB int64   `json:"memory_mb" yaml:"memory_mb" required:"false"`
	// MinVRAMMB is a per-device floor on top of the board's.
	MinVRAMMB      int    `json:"min_vram_mb,omitempty" yaml:"min_vram_mb,omitempty"`
	MaxConcurrency int    `json:"max_concurrency,omitempty" yaml:"max_concurrency,omitempty"`
	Group          string `json:"group,omitempty" yaml:"group,omitempty"`
	// NodeAffinity: the node must carry every listed label (value in set).
	NodeAffinity []Selector `json:"node_affinity,omitempty" yaml:"node_affinity,omitempty"`
	// NodeAntiAffinity: the node must carry none of them.
	NodeAntiAffinity []Selector `json:"node_anti_affinity,omitempty" yaml:"node_anti_affinity,omitempty"`
	// AntiAffinity keeps an instance off nodes already running an
	// allocation whose labels match (work, role, kind, config and Labels).
	// Selecting the role's own name spreads its instances one per node.
	AntiAffinity []Selector        `json:"anti_affinity,omitempty" yaml:"anti_affinity,omitempty"`
	Labels       map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
	// Command is what each instance runs (jobs: argv on its node).
	Command []string `json:"command,omitempty" yaml:"command,omitempty"`
}

// Selector matches a label whose value is one of Values (any value when
// Values is empty).
type Selector struct {
	Key    string   `json:"key" yaml:"key"`
	Values []string `json:"values,omitempty" yaml:"values,omitempty"`
}

// Matches reports whether labels satisfy the selector.
func (s Selector) Matches(labels map[string]string) bool {
	v, ok := labels[s.Key]
	if !ok {
		return false
	}
	if len(s.Values) == 0 {
		return true
	}
	for _, want := range s.Values {
		if v == want {
			return true
		}
	}
	return false
}

// Group is a colocation group's strategy.
type Group struct {
	Name     string   `json:"name" yaml:"name"`
	Strategy Strategy `json:"strategy" yaml:"strategy"`
}

// Providers are soft preferences; policies may forbid some (training never
// prefers an ephemeral provider).
type Providers struct {
	Prefer []string `json:"prefer,omitempty" yaml:"prefer,omitempty"`
	Avoid  []string `json:"avoid,omitempty" yaml:"avoid,omitempty"`
}

// Rollout holds the seed-000 scaling knobs. Workers, when set, is the count
// of the rollout_worker role.
type Rollout struct {
	Workers       int `json:"workers,omitempty" yaml:"workers,omitempty"`                 // RAY_WORKERS
	EnvsPerWorker int `json:"envs_per_worker,omitempty" yaml:"envs_per_worker,omitempty"` // ENVS_PER_WORKER
	EpisodeLength int `json:"episode_length,omitempty" yaml:"episode_length,omitempty"`   // EPISODE_LENGTH
	BatchSize     int `json:"batch_size,omitempty" yaml:"batch_size,omitempty"`           // BATCH_SIZE
}

// Environment is extra environment for the work's processes.
type Environment map[string]string

// Parse reads a spec from YAML or JSON (JSON is YAML), rejecting unknown
// fields, then applies defaults. It does not validate.
func Parse(data []byte) (Spec, error) {
	var s Spec
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return Spec{}, fmt.Errorf("parse work spec: %w", err)
		}
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&s); err != nil {
			return Spec{}, fmt.Errorf("parse work spec: %w", err)
		}
	}
	s.ApplyDefaults()
	return s, nil
}

// Seed-000 defaults of the rollout knobs ("conservative" column).
const (
	DefaultWorkers       = 3
	DefaultEnvsPerWorker = 3
	DefaultEpisodeLength = 30720
	DefaultBatchSize     = 4096
)

// ApplyDefaults fills unset knobs and counts, and lets Rollout.Workers set
// the rollout_worker count.
func (s *Spec) ApplyDefaults() {
	r := &s.Rollout
	if s.HasRole(RoleRolloutWorker) {
		if r.Workers == 0 {
			r.Workers = s.role(RoleRolloutWorker).Count
			if r.Workers == 0 {
				r.Workers = DefaultWorkers
			}
		}
		if r.EnvsPerWorker == 0 {
			r.EnvsPerWorker = DefaultEnvsPerWorker
		}
		if r.EpisodeLength == 0 {
			r.EpisodeLength = DefaultEpisodeLength
		}
		if r.BatchSize == 0 {
			r.BatchSize = DefaultBatchSize
		}
	}
	for i := range s.Roles {
		if s.Roles[i].Name == RoleRolloutWorker && r.Workers > 0 {
			s.Roles[i].Count = r.Workers
		}
		if s.Roles[i].Count == 0 {
			s.Roles[i].Count = 1
		}
	}
}

// Role is the role of that name (the zero Role when there is none).
func (s *Spec) Role(name string) Role {
	if r := s.role(name); r != nil {
		return *r
	}
	return Role{}
}

// HasRole reports whether a role of that name exists.
func (s *Spec) HasRole(name string) bool { return s.role(name) != nil }

func (s *Spec) role(name string) *Role {
	for i := range s.Roles {
		if s.Roles[i].Name == name {
			return &s.Roles[i]
		}
	}
	return nil
}

// GroupStrategy is the strategy of a colocation group (PACK by default).
func (s *Spec) GroupStrategy(group string) Strategy {
	for _, g := range s.Groups {
		if g.Name == group {
			return g.Strategy
		}
	}
	return Pack
}

// BoardName is Board, else Config's prefix before "_".
func (s *Spec) BoardName() string {
	if s.Board != "" {
		return s.Board
	}
	for i := 0; i < len(s.Config); i++ {
		if s.Config[i] == '_' {
			return s.Config[:i]
		}
	}
	return s.Config
}

// TotalEnvs is the number of environments stepped in parallel.
func (s *Spec) TotalEnvs() int { return s.Rollout.Workers * s.Rollout.EnvsPerWorker }
