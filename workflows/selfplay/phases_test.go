package selfplay

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/workspec"
)

// TestPhaseRequests: a loop whose model commands have resources asks each
// phase's own allocation (kind, role, resources, job ID); any other loop
// asks the generation's one for every phase.
func TestPhaseRequests(t *testing.T) {
	model := func(ev, tr *Resources) *ModelCommands {
		return &ModelCommands{Evaluator: []string{"serve"}, Trainer: []string{"train"}, EvaluatorResources: ev, TrainerResources: tr}
	}
	gpu := &Resources{GPUs: 1, CPUs: 2, MemoryMB: 1000}
	for _, tc := range []struct {
		name  string
		model *ModelCommands
		best  string
		phase string
		kind  string
		role  workspec.Role
		job   string
	}{
		{"built-in model", nil, "gen1", "train", workspec.KindSelfPlay, workspec.Role{Name: workspec.RoleSelfPlay, Count: 1, CPUs: 1, MemoryMB: 512}, "L/gen-2"},
		{"your model, no resources", model(nil, nil), "gen1", "gauntlet", workspec.KindSelfPlay, workspec.Role{Name: workspec.RoleSelfPlay, Count: 1, CPUs: 1, MemoryMB: 512}, "L/gen-2"},
		{"self-play before a model of yours plays", model(gpu, nil), "", "", workspec.KindSelfPlay, workspec.Role{Name: workspec.RoleSelfPlay, Count: 1, CPUs: 1, MemoryMB: 512}, "L/gen-2"},
		{"self-play with its evaluator", model(gpu, nil), "gen1", "", workspec.KindSelfPlay, workspec.Role{Name: workspec.RoleSelfPlay, Count: 1, CPUs: 3, GPUs: 1, MemoryMB: 1512}, "L/gen-2"},
		{"training, the trainer's resources", model(gpu, &Resources{GPUs: 2, CPUs: 8}), "gen1", "train", workspec.KindTraining, workspec.Role{Name: workspec.RoleTrainer, Count: 1, CPUs: 8, GPUs: 2}, "L/gen-2/train"},
		{"training, the generation's resources", model(gpu, nil), "gen1", "train", workspec.KindTraining, workspec.Role{Name: workspec.RoleTrainer, Count: 1, CPUs: 1, MemoryMB: 512}, "L/gen-2/train"},
		{"gauntlet, the first candidate alone", model(gpu, nil), "", "gauntlet", workspec.KindEvaluation, workspec.Role{Name: workspec.RoleEvaluator, Count: 1, CPUs: 3, GPUs: 1, MemoryMB: 1512}, "L/gen-2/gauntlet"},
		{"gauntlet, the best and the candidate", model(gpu, nil), "gen1", "gauntlet", workspec.KindEvaluation, workspec.Role{Name: workspec.RoleEvaluator, Count: 1, CPUs: 5, GPUs: 2, MemoryMB: 2512}, "L/gen-2/gauntlet"},
		// A populator's training item (runQueue sets the phase by its kind).
		{"work item: training", model(gpu, &Resources{GPUs: 1}), "gen1", "train", workspec.KindTraining, workspec.Role{Name: workspec.RoleTrainer, Count: 1, GPUs: 1}, "L/work-3-training"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &loop{in: Input{LoopID: "L", Config: "square8_2p"}, set: Settings{Model: tc.model}.WithDefaults(), st: &State{Generation: 2, Best: tc.best}}
			if strings.Contains(tc.job, "/work-") {
				l.job = tc.job
			}
			if tc.model.phased() {
				l.phase = tc.phase
			}
			ws := l.work()
			if ws.Kind != tc.kind || len(ws.Roles) != 1 || !reflect.DeepEqual(ws.Roles[0], tc.role) || ws.Name != tc.job || l.jobID() != tc.job {
				t.Fatalf("work %s (job %s): kind %s roles %+v; want %s %+v as %s", ws.Name, l.jobID(), ws.Kind, ws.Roles, tc.kind, tc.role, tc.job)
			}
		})
	}
}

func TestModelResourcesValidate(t *testing.T) {
	for _, tc := range []struct {
		m     ModelCommands
		field string
	}{
		{ModelCommands{EvaluatorResources: &Resources{GPUs: -1}}, "model.evaluator_resources.gpus"},
		{ModelCommands{TrainerResources: &Resources{CPUs: -0.5}}, "model.trainer_resources.cpus"},
		{ModelCommands{TrainerResources: &Resources{MemoryMB: -1}}, "model.trainer_resources.memory_mb"},
		{ModelCommands{EvaluatorResources: &Resources{GPUs: 1}, TrainerResources: &Resources{GPUs: 4, CPUs: 16}}, ""},
	} {
		tc.m.Evaluator, tc.m.Trainer, tc.m.MaxBatch = []string{"e"}, []string{"t"}, 1
		err := tc.m.validate()
		var fe *FieldError
		if tc.field == "" && err != nil || tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field) {
			t.Errorf("%+v: %v; want field %q", tc.m, err, tc.field)
		}
	}
}

// TestLoopWork: what the API preflights at a loop's start is every
// allocation the loop will ask for in its steady state: one self-play
// allocation, or in a phased loop self-play with your model's evaluator,
// training with the trainer's resources and the gauntlet with two
// evaluators.
func TestLoopWork(t *testing.T) {
	gpu := &Resources{GPUs: 1, CPUs: 2, MemoryMB: 1000}
	phased := Settings{Model: &ModelCommands{Evaluator: []string{"serve"}, Trainer: []string{"train"}, EvaluatorResources: gpu, TrainerResources: &Resources{GPUs: 4, CPUs: 16}}}
	for _, tc := range []struct {
		name string
		set  Settings
		want []workspec.Spec
	}{
		{"built-in model", Settings{}, []workspec.Spec{
			{Name: "L", Kind: workspec.KindSelfPlay, Config: "square8_2p", Roles: []workspec.Role{{Name: workspec.RoleSelfPlay, Count: 1, CPUs: 1, MemoryMB: 512}}},
		}},
		{"phased", phased, []workspec.Spec{
			{Name: "L", Kind: workspec.KindSelfPlay, Config: "square8_2p", Roles: []workspec.Role{{Name: workspec.RoleSelfPlay, Count: 1, CPUs: 3, GPUs: 1, MemoryMB: 1512}}},
			{Name: "L/train", Kind: workspec.KindTraining, Config: "square8_2p", Roles: []workspec.Role{{Name: workspec.RoleTrainer, Count: 1, CPUs: 16, GPUs: 4}}},
			{Name: "L/gauntlet", Kind: workspec.KindEvaluation, Config: "square8_2p", Roles: []workspec.Role{{Name: workspec.RoleEvaluator, Count: 1, CPUs: 5, GPUs: 2, MemoryMB: 2512}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LoopWork("L", "square8_2p", tc.set); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("LoopWork:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
