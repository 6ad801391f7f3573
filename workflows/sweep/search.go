package sweep

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/trainyard/trainyard/internal/training"
)

// Search algorithms.
const (
	SearchGrid   = "grid"
	SearchRandom = "random"
)

// Distribution kinds (Ray Tune's tune.uniform, tune.loguniform,
// tune.randint, tune.choice).
const (
	DistUniform    = "uniform"
	DistLogUniform = "loguniform"
	DistRandInt    = "randint"
	DistChoice     = "choice"
)

// Distribution is where random search draws one hyper-parameter from.
type Distribution struct {
	Kind   string  `json:"kind" enum:"uniform,loguniform,randint,choice" doc:"uniform: a float in [min, max); loguniform: a float whose logarithm is uniform in [log min, log max); randint: a whole number in [min, max); choice: one of values, each as likely."`
	Min    float64 `json:"min,omitempty" doc:"Lower bound (uniform, loguniform, randint)."`
	Max    float64 `json:"max,omitempty" doc:"Upper bound, excluded (uniform, loguniform, randint)."`
	Values []any   `json:"values,omitempty" doc:"The values to choose from (choice)."`
}

// sample draws one value. Floats keep 4 significant digits, so tables
// read 0.0003162 rather than 0.00031622776601683794.
func (d Distribution) sample(r *rand.Rand) any {
	round := func(f float64) float64 {
		v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 4, 64), 64)
		return v
	}
	switch d.Kind {
	case DistUniform:
		return round(d.Min + r.Float64()*(d.Max-d.Min))
	case DistLogUniform:
		lo, hi := math.Log(d.Min), math.Log(d.Max)
		return round(math.Exp(lo + r.Float64()*(hi-lo)))
	case DistRandInt:
		lo, hi := math.Ceil(d.Min), math.Ceil(d.Max)
		return lo + float64(r.Int64N(int64(hi-lo)))
	default: // choice
		return d.Values[r.IntN(len(d.Values))]
	}
}

// check says what is wrong with d, "" when nothing is.
func (d Distribution) check() string {
	bounded := !math.IsNaN(d.Min) && !math.IsNaN(d.Max) && !math.IsInf(d.Min, 0) && !math.IsInf(d.Max, 0) && d.Min < d.Max
	switch d.Kind {
	case DistUniform:
		if !bounded {
			return "uniform needs finite min < max"
		}
	case DistLogUniform:
		if !bounded || d.Min <= 0 {
			return "loguniform needs 0 < min < max"
		}
	case DistRandInt:
		if !bounded || math.Ceil(d.Min) >= math.Ceil(d.Max) || math.Abs(d.Max) > math.MaxInt32 || math.Abs(d.Min) > math.MaxInt32 {
			return "randint needs whole numbers min < max (max excluded)"
		}
	case DistChoice:
		if len(d.Values) == 0 {
			return "choice needs at least one value"
		}
	default:
		return fmt.Sprintf("kind %q: want uniform, loguniform, randint or choice", d.Kind)
	}
	return ""
}

// Trials are the params of every trial of spec, in trial order. A grid
// search is Expand(grid). A random search draws num_samples points of
// param_space from a PRNG seeded with search_seed, and combines each with
// every point of the grid (Ray Tune's num_samples repeats the grid): the
// same spec always gives the same trials, in the API (validation,
// admission) and in the workflow (its replays included). Nil when the
// spec has no trials or more than MaxTrials.
func Trials(spec SweepSpec) []Params {
	if spec.Search != SearchRandom {
		return Expand(spec.Grid)
	}
	grid := []Params{{}}
	if len(spec.Grid) > 0 {
		grid = Expand(spec.Grid)
	}
	n := spec.NumSamples * len(grid)
	if n <= 0 || n > MaxTrials || len(spec.ParamSpace) == 0 {
		return nil
	}
	names := make([]string, 0, len(spec.ParamSpace))
	for k := range spec.ParamSpace {
		if spec.ParamSpace[k].check() != "" {
			return nil
		}
		names = append(names, k)
	}
	slices.Sort(names)
	r := rand.New(rand.NewPCG(spec.SearchSeed, spec.SearchSeed^0x9e3779b97f4a7c15))
	out := make([]Params, 0, n)
	for range spec.NumSamples {
		for _, g := range grid {
			p := make(Params, len(names)+len(g))
			for k, v := range g {
				p[k] = v
			}
			for _, k := range names {
				p[k] = spec.ParamSpace[k].sample(r)
			}
			out = append(out, p)
		}
	}
	return out
}

// validateSearch checks the search fields of spec (not the trials).
func validateSearch(spec SweepSpec) []*training.FieldError {
	var errs []*training.FieldError
	switch spec.Search {
	case "", SearchGrid:
		if len(spec.Grid) == 0 {
			errs = append(errs, &training.FieldError{Field: "grid", Reason: "empty: give at least one name with values, e.g. {\"learning_rate\": [0.001, 0.0003]}"})
		}
		if len(spec.ParamSpace) > 0 {
			errs = append(errs, &training.FieldError{Field: "param_space", Reason: "is sampled by random search: set search: random"})
		}
		if spec.NumSamples != 0 {
			errs = append(errs, &training.FieldError{Field: "num_samples", Reason: "is for search: random (a grid runs each point once)"})
		}
	case SearchRandom:
		if len(spec.ParamSpace) == 0 {
			errs = append(errs, &training.FieldError{Field: "param_space", Reason: "empty: random search needs at least one distribution, e.g. {\"learning_rate\": {\"kind\": \"loguniform\", \"min\": 1e-5, \"max\": 3e-3}}"})
		}
		if spec.NumSamples < 1 {
			errs = append(errs, &training.FieldError{Field: "num_samples", Reason: fmt.Sprintf("random search needs 1..%d samples", MaxTrials)})
		}
		for _, k := range slices.Sorted(maps.Keys(spec.ParamSpace)) { // errors in a stable order
			d := spec.ParamSpace[k]
			if _, ok := spec.Grid[k]; ok {
				errs = append(errs, &training.FieldError{Field: "param_space." + k, Reason: "also in grid: give it one or the other"})
			}
			if why := d.check(); why != "" {
				errs = append(errs, &training.FieldError{Field: "param_space." + k, Reason: why})
			}
		}
	default:
		errs = append(errs, &training.FieldError{Field: "search", Reason: fmt.Sprintf("%q: want grid or random", spec.Search)})
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Grid)) {
		if vs := spec.Grid[k]; len(vs) == 0 {
			errs = append(errs, &training.FieldError{Field: "grid." + k, Reason: "needs at least one value"})
		}
	}
	n, field := Size(spec.Grid), "grid"
	if spec.Search == SearchRandom {
		n, field = max(1, n)*min(spec.NumSamples, MaxTrials+1), "num_samples"
	}
	if n > MaxTrials {
		errs = append(errs, &training.FieldError{Field: field, Reason: fmt.Sprintf("expands to %d trials; at most %d", n, MaxTrials)})
	}
	return errs
}
