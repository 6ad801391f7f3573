package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/trainyard/trainyard/internal/names"
	"github.com/trainyard/trainyard/internal/training"
)

// MaxTrials caps a sweep's grid: each trial is a child workflow and a row
// of the results table, and a bigger grid is almost always a typo.
const MaxTrials = 256

// Knobs are the grid names that set a run's own fields (the seed and the
// seed-000 knobs) rather than a PPO hyper-parameter.
var Knobs = []string{"seed", "workers", "envs_per_worker", "episode_length", "batch_size"}

// Params are one trial's grid values by name.
type Params map[string]any

// String renders params in name order, e.g. "gamma=0.99 learning_rate=0.001".
func (p Params) String() string {
	names := make([]string, 0, len(p))
	for k := range p {
		names = append(names, k)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = k + "=" + FormatValue(p[k])
	}
	return strings.Join(parts, " ")
}

// FormatValue renders a grid value as JSON without spaces (0.001, [64,64],
// true); strings are written bare so they can stand in a command line.
func FormatValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Size is the number of trials grid expands to (0 for an empty grid);
// it saturates instead of overflowing so huge grids are still refused.
func Size(grid map[string][]any) int {
	if len(grid) == 0 {
		return 0
	}
	n := 1
	for _, vs := range grid {
		if len(vs) == 0 {
			return 0
		}
		if n > math.MaxInt32/len(vs) {
			return math.MaxInt32
		}
		n *= len(vs)
	}
	return n
}

// Expand is the cartesian product of grid: names in alphabetical order,
// the last name varying fastest, values in the order given. The order is
// the trials' numbering, so it must not depend on map iteration.
func Expand(grid map[string][]any) []Params {
	n := Size(grid)
	if n == 0 || n > MaxTrials {
		return nil
	}
	names := make([]string, 0, len(grid))
	for k := range grid {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]Params, n)
	for i := range out {
		p := make(Params, len(names))
		rest := i
		for j := len(names) - 1; j >= 0; j-- {
			vs := grid[names[j]]
			p[names[j]] = vs[rest%len(vs)]
			rest /= len(vs)
		}
		out[i] = p
	}
	return out
}

// Normalize rewrites grid values that a trial could not use as given: a
// number for a list-valued hyper-parameter (hidden=64) sets every layer to
// that width, keeping the depth of config, the learner's config without
// the grid ([64,64]). It returns a copy; the input is not changed.
func Normalize(grid map[string][]any, config any) map[string][]any {
	var defaults map[string]any
	if b, err := json.Marshal(config); err == nil {
		_ = json.Unmarshal(b, &defaults)
	}
	out := make(map[string][]any, len(grid))
	for k, vs := range grid {
		list, isList := defaults[k].([]any)
		nv := make([]any, len(vs))
		for i, v := range vs {
			nv[i] = v
			if f, ok := v.(float64); ok && isList && len(list) > 0 {
				l := make([]any, len(list))
				for j := range l {
					l[j] = f
				}
				nv[i] = l
			}
		}
		out[k] = nv
	}
	return out
}

// Normalized is spec with Normalize applied to its grid and to the
// values of its choice distributions.
func (s SweepSpec) Normalized(envName string) SweepSpec {
	base := s.Run
	base.Hyperparameters = nil
	config, _ := base.LearnerConfig(envName) // nil (nothing to normalise) for a command trainer
	s.Grid = Normalize(s.Grid, config)
	if len(s.ParamSpace) == 0 {
		return s
	}
	choices := map[string][]any{}
	for k, d := range s.ParamSpace {
		if d.Kind == DistChoice {
			choices[k] = d.Values
		}
	}
	norm := Normalize(choices, config)
	space := make(map[string]Distribution, len(s.ParamSpace))
	for k, d := range s.ParamSpace {
		if vs, ok := norm[k]; ok {
			d.Values = vs
		}
		space[k] = d
	}
	s.ParamSpace = space
	return s
}

// TrialSpec is the run spec of one trial: the base run with p applied. A
// built-in learner's run takes knobs as its own fields and the rest as
// hyper-parameters; a command run gets each value substituted for
// "{name}" in its argv (how a trainer of its own sees the trial).
func TrialSpec(base training.Spec, p Params) (training.Spec, error) {
	s := base
	if s.Shape().Process() {
		s.Command = slices.Clone(base.Command)
		for _, k := range slices.Sorted(maps.Keys(p)) { // the same first error every time
			v := p[k]
			ph := "{" + k + "}"
			used := false
			for i, a := range s.Command {
				if strings.Contains(a, ph) {
					s.Command[i] = strings.ReplaceAll(a, ph, FormatValue(v))
					used = true
				}
			}
			if !used {
				return s, &training.FieldError{Field: "grid." + k, Reason: fmt.Sprintf("a command trial sees grid values only as placeholders in its command: put %s in run.command", ph)}
			}
		}
		return s, nil
	}
	hp := make(map[string]any, len(base.Hyperparameters)+len(p))
	for k, v := range base.Hyperparameters {
		hp[k] = v
	}
	for _, k := range slices.Sorted(maps.Keys(p)) {
		v := p[k]
		if !slices.Contains(Knobs, k) {
			hp[k] = v
			continue
		}
		f, ok := v.(float64)
		if !ok || f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
			return s, &training.FieldError{Field: "grid." + k, Reason: fmt.Sprintf("%s=%s: want a whole number ≥ 0", k, FormatValue(v))}
		}
		switch k {
		case "seed":
			s.Seed = uint64(f)
		case "workers":
			s.Workers = int(f)
		case "envs_per_worker":
			s.EnvsPerWorker = int(f)
		case "episode_length":
			s.EpisodeLength = int(f)
		case "batch_size":
			s.BatchSize = int(f)
		}
	}
	if len(hp) > 0 {
		s.Hyperparameters = hp
	}
	return s, nil
}

// ValidateTrials checks every trial of spec as POST /v1/runs would check a
// run (training.Spec.Validate, then the PPO config for envName) and the
// sweep's own fields. Every problem is a *training.FieldError with a path
// relative to the sweep body (grid.learning_rat, run.cluster, ...),
// joined; a problem common to all trials is reported once.
func ValidateTrials(spec SweepSpec, envName string) error {
	var errs []error
	seen := map[string]bool{}
	add := func(fe *training.FieldError) {
		if key := fe.Field + "\x00" + fe.Reason; !seen[key] {
			seen[key] = true
			errs = append(errs, fe)
		}
	}
	for _, fe := range validateSearch(spec) {
		add(fe)
	}
	if err := names.Label.Check(spec.Name); err != nil {
		add(&training.FieldError{Field: "name", Reason: err.Error()})
	}
	if sc := spec.Scheduler; sc != nil {
		for _, fe := range sc.check(int64(spec.Run.WithDefaults().Iterations), slices.Sorted(maps.Keys(spec.Run.Policies))) {
			add(fe)
		}
		if !spec.Run.Shape().Learns() {
			add(&training.FieldError{Field: "scheduler", Reason: "a command trial reports no metrics to judge it by; schedulers are for the built-in learner"})
		}
	}
	if spec.MaxConcurrent < 0 || spec.MaxConcurrent > MaxTrials {
		add(&training.FieldError{Field: "max_concurrent", Reason: fmt.Sprintf("must be 0..%d (0: default %d)", MaxTrials, DefaultMaxConcurrent)})
	}
	g := spec.GPUsPerTrial
	switch {
	case math.IsNaN(g) || g < 0 || (g > 1 && g != math.Trunc(g)) || g > 64:
		add(&training.FieldError{Field: "gpus_per_trial", Reason: "must be a fraction of one GPU (0.25: four trials share a device) or a whole number up to 64"})
	case g > 0 && !spec.Run.Shape().Process():
		add(&training.FieldError{Field: "gpus_per_trial", Reason: "the built-in learner trains on CPUs; GPUs go to command trials (run.algorithm: command)"})
	case g > 0 && spec.Run.GPUs > 0:
		add(&training.FieldError{Field: "run.gpus", Reason: "set gpus_per_trial instead"})
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, p := range Trials(spec) {
		ts, err := spec.TrialSpec(p)
		if err == nil {
			err = ts.Validate()
			if err == nil && ts.Shape().Learns() {
				_, err = ts.LearnerConfig(envName)
			}
		}
		for _, e := range unwrap(err) {
			var fe *training.FieldError
			if !errors.As(e, &fe) {
				add(&training.FieldError{Field: "run", Reason: e.Error()})
				continue
			}
			add(relocate(fe, p, spec.ParamSpace))
		}
	}
	return errors.Join(errs...)
}

// TrialSpec is the run spec a trial starts with: the base run with p
// applied (TrialSpec), its whole GPUs, and asha's max_t as its iterations.
func (s SweepSpec) TrialSpec(p Params) (training.Spec, error) {
	ts, err := TrialSpec(s.Run, p)
	if err != nil {
		return ts, err
	}
	ts = WithGPUs(ts, s.GPUsPerTrial)
	if sc := s.Scheduler; sc != nil && sc.Type == SchedulerASHA && sc.MaxT > 0 {
		ts.Iterations = int(sc.MaxT)
	}
	// A trial is a spec made here: defaulted here (a grid value of 0 for
	// a knob takes its default), once.
	return ts.WithDefaults(), nil
}

// WithGPUs gives a command trial its whole GPUs; a fraction is reserved
// by the sweep itself (see reserve), so the spec asks for none.
func WithGPUs(s training.Spec, gpus float64) training.Spec {
	if gpus >= 1 {
		s.GPUs = int(gpus)
	}
	return s
}

// relocate points a trial's field error at the sweep body: a
// hyper-parameter or knob from the grid at grid.<name> (from param_space
// at param_space.<name>), the rest at run.
func relocate(fe *training.FieldError, p Params, space map[string]Distribution) *training.FieldError {
	at := func(name string) *training.FieldError {
		if _, ok := space[name]; ok {
			return &training.FieldError{Field: "param_space." + name, Reason: fe.Reason}
		}
		return &training.FieldError{Field: "grid." + name, Reason: fe.Reason}
	}
	if name := strings.TrimPrefix(fe.Field, "hyperparameters."); has(p, name) {
		return at(name)
	}
	if has(p, fe.Field) {
		return at(fe.Field)
	}
	if name, ok := strings.CutPrefix(fe.Field, "grid."); ok {
		return at(name)
	}
	if fe.Field == "hyperparameters" && len(p) > 0 {
		// The decoder's message names the field; the trial says which values.
		return &training.FieldError{Field: "grid", Reason: "trial " + p.String() + ": " + fe.Reason}
	}
	return &training.FieldError{Field: "run." + fe.Field, Reason: fe.Reason}
}

func has(p Params, name string) bool {
	_, ok := p[name]
	return ok
}

func unwrap(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unwrap(e)...)
		}
		return out
	}
	return []error{err}
}
