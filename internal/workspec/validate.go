package workspec

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
)

// FieldError is one problem with one field, e.g. `roles[1].gpus: must be >= 0`.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// FieldErrors is every problem Validate found.
type FieldErrors []FieldError

func (es FieldErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// Validate checks the spec and returns FieldErrors (nil when valid). It
// checks shape only; whether the cluster can hold the work is admission's
// and the scheduler's business.
func (s *Spec) Validate() error {
	var es FieldErrors
	add := func(field, format string, args ...any) {
		es = append(es, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if !nameRE.MatchString(s.Name) {
		add("name", "must match %s", nameRE)
	}
	if !slices.Contains(Kinds, s.Kind) {
		add("kind", "must be one of %s", strings.Join(Kinds, ", "))
	}
	if len(s.Roles) == 0 {
		add("roles", "must list at least one role")
	}
	seen := map[string]int{}
	groups := map[string]bool{}
	for i, r := range s.Roles {
		f := fmt.Sprintf("roles[%d]", i)
		if !nameRE.MatchString(r.Name) {
			add(f+".name", "must match %s", nameRE)
		} else if j, dup := seen[r.Name]; dup {
			add(f+".name", "duplicates roles[%d]", j)
		}
		seen[r.Name] = i
		if r.Count < 1 {
			add(f+".count", "must be >= 1")
		}
		switch {
		case r.CPUs < 0 || math.IsNaN(r.CPUs):
			add(f+".cpus", "must be >= 0")
		case r.CPUs == 0 && r.GPUs == 0:
			add(f+".cpus", "must be > 0 for a role without GPUs")
		}
		switch {
		case r.GPUs < 0 || math.IsNaN(r.GPUs):
			add(f+".gpus", "must be >= 0")
		case r.GPUs > 1 && r.GPUs != math.Trunc(r.GPUs):
			add(f+".gpus", "must be a whole number above 1 (fractions share one device)")
		}
		if r.MemoryMB < 0 {
			add(f+".memory_mb", "must be >= 0")
		}
		if r.MinVRAMMB < 0 {
			add(f+".min_vram_mb", "must be >= 0")
		}
		if r.MaxConcurrency < 0 {
			add(f+".max_concurrency", "must be >= 0")
		}
		if r.Group != "" {
			if !nameRE.MatchString(r.Group) {
				add(f+".group", "must match %s", nameRE)
			}
			groups[r.Group] = true
		}
		for _, sels := range []struct {
			field string
			list  []Selector
		}{{"node_affinity", r.NodeAffinity}, {"node_anti_affinity", r.NodeAntiAffinity}, {"anti_affinity", r.AntiAffinity}} {
			for j, sel := range sels.list {
				if sel.Key == "" {
					add(fmt.Sprintf("%s.%s[%d].key", f, sels.field, j), "must not be empty")
				}
			}
		}
	}
	for i, g := range s.Groups {
		f := fmt.Sprintf("groups[%d]", i)
		if !groups[g.Name] {
			add(f+".name", "no role is in group %q", g.Name)
		}
		if !slices.Contains(Strategies, g.Strategy) {
			add(f+".strategy", "must be one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD")
		}
	}
	for i, t := range s.Tiers {
		if t < 1 {
			add(fmt.Sprintf("tiers[%d]", i), "must be >= 1")
		}
	}
	for _, p := range s.Providers.Prefer {
		if slices.Contains(s.Providers.Avoid, p) {
			add("providers", "%s is both preferred and avoided", p)
		}
	}
	r := s.Rollout
	for _, k := range []struct {
		field string
		v     int
	}{{"rollout.workers", r.Workers}, {"rollout.envs_per_worker", r.EnvsPerWorker}, {"rollout.episode_length", r.EpisodeLength}, {"rollout.batch_size", r.BatchSize}} {
		if k.v < 0 {
			add(k.field, "must be >= 0")
		}
	}
	if len(es) == 0 {
		return nil
	}
	return es
}
