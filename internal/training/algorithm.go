package training

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/ppo"
)

// Algorithm is one way a run trains: the spec fields it owns, their
// defaults and checks, and the shape the train workflow runs it in. Each
// is registered once (RegisterAlgorithm, from its package's init); the
// API, the CLI, sweeps and the workflow ask the registry, never the name.
// docs/architecture.md walks through adding one.
type Algorithm struct {
	Name string
	// Doc is one line for people: errors and `trainyard run algorithms`.
	Doc string
	// Shape is how the train workflow runs a placement of it.
	Shape Shape
	// Kind is the run kind that sets this algorithm (llm sets llm); ""
	// for the algorithms a kind training run names in algorithm.
	Kind string
	// Defaults fills the fields it owns; once, at submission
	// (Spec.WithDefaults), never again in the workflow or on the agent.
	Defaults func(*Spec)
	// Validate reports each problem with the fields it owns through bad.
	Validate func(s Spec, bad func(field, format string, a ...any))
	// Learner makes and restores the algorithm's learner (ShapeSegments):
	// its config, checked at submission, and its checkpoints.
	// A Learner that is also a learner.Distributor trains from rollout
	// workers (rollout_workers > 0); any other refuses rollout_workers.
	Learner learner.Factory
}

// Distributes reports whether a takes rollout_workers.
func (a Algorithm) Distributes() bool {
	_, ok := a.Learner.(learner.Distributor)
	return ok
}

// Shape is how the train workflow runs an algorithm's placement
// (workflows/train registers one runner per shape).
type Shape string

const (
	// ShapeSegments: the built-in learner on the agent, in segments of
	// checkpoint_every iterations, each ending in a checkpoint; with
	// rollout_workers, its rollout workers beside it.
	ShapeSegments Shape = "segments"
	// ShapeCommand: the user's trainer process, one long activity per
	// placement, its checkpoint dir synced; nodes > 1 runs one rank a node.
	ShapeCommand Shape = "command"
	// ShapeLoop: the LLM-RL loop's trainer, pool and rollout workers.
	ShapeLoop Shape = "loop"
)

// What each shape can do, the one place that says so: the API, the CLI,
// sweeps and the workflow ask these, never a shape's name.
var shapes = map[Shape]struct{ pausable, learns, process bool }{
	ShapeSegments: {pausable: true, learns: true},
	ShapeCommand:  {process: true},
	ShapeLoop:     {pausable: true},
}

// Pausable reports whether the platform sees the shape's checkpoint
// boundaries, so a pause can stop it at one (a command's it cannot).
func (s Shape) Pausable() bool { return shapes[s].pausable }

// Learns reports whether the platform's learner trains it, so its progress
// is iterations and their metrics, its config is the algorithm's learner
// config (hyper-parameters), and a sweep trial's values reach it as
// hyper-parameters (the others report scalars of their own:
// TRAINYARD_SCALAR lines, the loop's status).
func (s Shape) Learns() bool { return shapes[s].learns }

// Process reports whether the trainer is the user's own process: it gets
// GPUs and nodes (ranks, one per node), its output is per rank, and a sweep
// trial's values reach it in its argv.
func (s Shape) Process() bool { return shapes[s].process }

var (
	algorithmsMu sync.RWMutex
	algorithms   = map[string]Algorithm{}
)

// RegisterAlgorithm adds a; a second algorithm of one name is a
// programming error.
func RegisterAlgorithm(a Algorithm) {
	algorithmsMu.Lock()
	defer algorithmsMu.Unlock()
	if a.Name == "" || a.Shape == "" {
		panic("training: an algorithm needs a name and a shape")
	}
	if _, dup := algorithms[a.Name]; dup {
		panic("training: algorithm " + a.Name + " registered twice")
	}
	algorithms[a.Name] = a
}

// LookupAlgorithm finds a registered algorithm by name.
func LookupAlgorithm(name string) (Algorithm, bool) {
	algorithmsMu.RLock()
	defer algorithmsMu.RUnlock()
	a, ok := algorithms[name]
	return a, ok
}

// Algorithms are the registered algorithms, by name.
func Algorithms() []Algorithm {
	algorithmsMu.RLock()
	defer algorithmsMu.RUnlock()
	return slices.SortedFunc(maps.Values(algorithms), func(a, b Algorithm) int { return strings.Compare(a.Name, b.Name) })
}

// selectable is what a kind training run may name in algorithm.
func selectable() string {
	var ns []string
	for _, a := range Algorithms() {
		if a.Kind == "" {
			ns = append(ns, fmt.Sprintf("%q", a.Name))
		}
	}
	return strings.Join(ns, ", ")
}

// distributable names the algorithms that take rollout_workers.
func distributable() string {
	var ns []string
	for _, a := range Algorithms() {
		if a.Distributes() {
			ns = append(ns, fmt.Sprintf("%q", a.Name))
		}
	}
	return strings.Join(ns, ", ")
}

// Shape is how the workflow runs the spec's algorithm, defaulted or not
// ("" when it names none registered; Validate says so).
func (s Spec) Shape() Shape {
	name := s.Algorithm
	switch {
	case s.Kind == KindLLM:
		name = AlgorithmLLM
	case name == "":
		name = AlgorithmPPO
	}
	a, _ := LookupAlgorithm(name)
	return a.Shape
}

// The built-in algorithms.
func init() {
	RegisterAlgorithm(Algorithm{
		Name: AlgorithmPPO, Shape: ShapeSegments,
		Doc: "the built-in learner: PPO on the env plugin, in segments checkpointed to S3 (the default)",
		Validate: func(s Spec, bad func(field, format string, a ...any)) {
			LearnerFields(s, AlgorithmPPO, bad)
		},
		Learner: ppo.Factory{},
	})
	RegisterAlgorithm(Algorithm{
		Name: AlgorithmCommand, Shape: ShapeCommand,
		Doc: "your own trainer: command runs on the node with its GPUs, its checkpoint dir synced to S3",
		Validate: func(s Spec, bad func(field, format string, a ...any)) {
			if s.Nodes < 0 || s.Nodes > 64 {
				bad("nodes", "must be 1..64, got %d", s.Nodes)
			}
			if len(s.Command) == 0 || s.Command[0] == "" {
				bad("command", "required for algorithm %q: the trainer's argv", AlgorithmCommand)
			}
			if s.GPUs < 0 || s.SyncEverySeconds < 1 {
				bad("gpus", "gpus must be ≥ 0 and sync_every_seconds ≥ 1")
			}
			if s.RolloutWorkers > 0 {
				bad("rollout_workers", "distributed rollouts are the built-in learner's; a command trainer steps its own envs")
			}
		},
	})
	RegisterAlgorithm(Algorithm{
		Name: AlgorithmLLM, Shape: ShapeLoop, Kind: KindLLM,
		Doc: "the LLM-RL loop (kind llm): rollout workers, a trajectory pool, a trainer and weight sync",
		// Its defaults are kind llm's (loopDefaults), which set it.
		Validate: func(s Spec, bad func(field, format string, a ...any)) {
			if s.Kind != KindLLM {
				bad("algorithm", "%q is set by kind %q", AlgorithmLLM, KindLLM)
			}
		},
	})
}

// LearnerFields checks what every algorithm on the built-in learner
// needs: an env, and none of a command trainer's fields.
func LearnerFields(s Spec, name string, bad func(field, format string, a ...any)) {
	if a, ok := LookupAlgorithm(name); ok && !a.Distributes() && s.RolloutWorkers > 0 {
		bad("rollout_workers", "algorithm %q trains on its own envs; distributed rollouts are for %s", name, distributable())
	}
	if s.Env == "" {
		bad("env", "required: an env plugin's sha256, name@version or name")
	}
	if len(s.Command) > 0 || s.GPUs > 0 || s.Nodes > 1 {
		bad("command", "command, gpus and nodes belong to algorithm %q, not %q", AlgorithmCommand, name)
	}
}
