// Package schedule decides which game config gets the next slice of
// self-play: the seed's SelfplayScheduler (priority by Elo velocity and
// curriculum weight, quality gating) with its missing pieces (config quota
// enforcement, a starvation boost after 4 h). Pure and deterministic: the
// scheduler workflow calls it with workflow time.
package schedule

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Tuning tune the priority; zero fields take the defaults.
type Tuning struct {
	// VelocityScale is the Elo/day that doubles a config's priority
	// (default 10: the seed's target is > 5 Elo/day).
	VelocityScale float64 `json:"velocity_scale,omitempty"`
	// StarvationAfter: a config not scheduled for this long gets
	// StarvationBoost (default 4h, ×3).
	StarvationAfter time.Duration `json:"starvation_after,omitempty"`
	StarvationBoost float64       `json:"starvation_boost,omitempty"`
	// QualityThreshold: a config whose last batch scored below it gets
	// QualityPenalty (default 0.7, ×0.5): bad data is not worth more games
	// until it is looked at.
	QualityThreshold float64 `json:"quality_threshold,omitempty"`
	QualityPenalty   float64 `json:"quality_penalty,omitempty"`
	// OverQuotaPenalty multiplies a config that used more than its quota
	// (default 0.1).
	OverQuotaPenalty float64 `json:"over_quota_penalty,omitempty"`
}

func (o Tuning) withDefaults() Tuning {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.VelocityScale, 10)
	def(&o.StarvationBoost, 3)
	def(&o.QualityThreshold, 0.7)
	def(&o.QualityPenalty, 0.5)
	def(&o.OverQuotaPenalty, 0.1)
	if o.StarvationAfter == 0 {
		o.StarvationAfter = 4 * time.Hour
	}
	return o
}

// ConfigStat is what the scheduler knows of one config.
type ConfigStat struct {
	Config string `json:"config"`
	// Weight is the curriculum weight (default 1).
	Weight float64 `json:"weight,omitempty"`
	// Quota is the config's share of all slices (the seed's
	// config_quotas; 0: no quota).
	Quota float64 `json:"quota,omitempty"`
	// TargetElo: the config is done once its best reaches it (0: never).
	TargetElo float64 `json:"target_elo,omitempty"`

	// Observed.
	Slices       int       `json:"slices"`
	LastRun      time.Time `json:"last_run,omitempty"`
	Velocity     float64   `json:"velocity" doc:"Elo/day of the best model."`
	BestElo      float64   `json:"best_elo,omitempty"`
	Quality      float64   `json:"quality,omitempty" doc:"Quality score of the last self-play batch."`
	QualityKnown bool      `json:"quality_known,omitempty"`
	Running      bool      `json:"running,omitempty"`
	// ExpectedSlice is the predicted duration of the config's next slice
	// (its mean generation duration × generations per slice).
	ExpectedSlice time.Duration `json:"expected_slice,omitempty" doc:"Predicted duration of the next slice, in ns."`
	// Disabled, when set, says why the config gets no more slices (its
	// loop failed).
	Disabled string `json:"disabled,omitempty"`
}

// Scored is a config's priority and why.
type Scored struct {
	Config   string  `json:"config"`
	Priority float64 `json:"priority"`
	Why      string  `json:"why"`
}

// Done reports whether a config met its Elo target.
func (c ConfigStat) Done() bool { return c.TargetElo > 0 && c.BestElo >= c.TargetElo }

// Priority scores one config among all (for quota shares):
// weight × (1 + max(0, velocity)/scale), ×3 when never run or starved for
// 4 h, ×0.5 after a batch below the quality threshold, ×0.1 over quota.
// Done, running and disabled configs score 0.
func Priority(c ConfigStat, all []ConfigStat, now time.Time, o Tuning) Scored {
	o = o.withDefaults()
	s := Scored{Config: c.Config}
	switch {
	case c.Done():
		s.Why = fmt.Sprintf("done: best %.0f ≥ target %.0f", c.BestElo, c.TargetElo)
		return s
	case c.Running:
		s.Why = "running"
		return s
	case c.Disabled != "":
		s.Why = "disabled: " + c.Disabled
		return s
	}
	w := c.Weight
	if w <= 0 {
		w = 1
	}
	why := []string{fmt.Sprintf("weight %.2f", w)}
	p := w * (1 + max(0, c.Velocity)/o.VelocityScale)
	if c.Velocity != 0 {
		why = append(why, fmt.Sprintf("velocity %.1f Elo/day", c.Velocity))
	}
	switch {
	case c.LastRun.IsZero():
		p *= o.StarvationBoost
		why = append(why, "never run")
	case now.Sub(c.LastRun) >= o.StarvationAfter:
		p *= o.StarvationBoost
		why = append(why, fmt.Sprintf("starved %v", now.Sub(c.LastRun).Round(time.Minute)))
	}
	if c.QualityKnown && c.Quality < o.QualityThreshold {
		p *= o.QualityPenalty
		why = append(why, fmt.Sprintf("quality %.2f < %.2f", c.Quality, o.QualityThreshold))
	}
	if c.Quota > 0 {
		total := 0
		for _, x := range all {
			total += x.Slices
		}
		if total > 0 && float64(c.Slices)/float64(total) > c.Quota {
			p *= o.OverQuotaPenalty
			why = append(why, fmt.Sprintf("over quota (%d of %d slices > %.0f%%)", c.Slices, total, 100*c.Quota))
		}
	}
	s.Priority, s.Why = p, strings.Join(why, ", ")
	return s
}

// Rank scores every config, highest priority first (ties by name).
func Rank(all []ConfigStat, now time.Time, o Tuning) []Scored {
	out := make([]Scored, len(all))
	for i, c := range all {
		out[i] = Priority(c, all, now, o)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority > out[j].Priority
		}
		return out[i].Config < out[j].Config
	})
	return out
}

// Pick is the config to run next, "" when every config is done or
// running.
func Pick(all []ConfigStat, now time.Time, o Tuning) string {
	r := Rank(all, now, o)
	if len(r) == 0 || r[0].Priority <= 0 {
		return ""
	}
	return r[0].Config
}
