// Package populate is the seed's QueuePopulator as a pure decision: which
// kind of work (self-play, training, tournament) each game config gets
// queued next so that every config's work keeps the target mix (60/30/10
// by default), which configs are served first when the queue is full
// (curriculum weight × Elo velocity, ×3 for a config starved of work for
// 4 h), and which configs get nothing more because their best model met
// its Elo target. The populator workflow calls it with workflow time.
package populate

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The kinds of work.
const (
	Selfplay   = "selfplay"
	Training   = "training"
	Tournament = "tournament"
)

// Kinds in their tie-break order.
var Kinds = []string{Selfplay, Training, Tournament}

// Mix is the target share of each kind; the seed's is 60/30/10.
type Mix struct {
	Selfplay   float64 `json:"selfplay"`
	Training   float64 `json:"training"`
	Tournament float64 `json:"tournament"`
}

// Of is the share of kind.
func (m Mix) Of(kind string) float64 {
	switch kind {
	case Selfplay:
		return m.Selfplay
	case Training:
		return m.Training
	case Tournament:
		return m.Tournament
	}
	return 0
}

// DefaultMix is the seed's target distribution.
var DefaultMix = Mix{Selfplay: 0.6, Training: 0.3, Tournament: 0.1}

// Counts is work by kind.
type Counts map[string]int

// Total sums the kinds.
func (c Counts) Total() int { return c[Selfplay] + c[Training] + c[Tournament] }

// Share is the mix the counts make (zero without work).
func (c Counts) Share() Mix {
	t := float64(c.Total())
	if t == 0 {
		return Mix{}
	}
	return Mix{Selfplay: float64(c[Selfplay]) / t, Training: float64(c[Training]) / t, Tournament: float64(c[Tournament]) / t}
}

// PopulatorTuning are the populator's knobs; zero fields take the defaults.
type PopulatorTuning struct {
	Mix Mix `json:"mix,omitempty" doc:"Target share of self-play, training and tournament work (default 0.6/0.3/0.1)."`
	// Depth is how many items each config keeps queued (its run-ahead).
	Depth int `json:"depth,omitempty" doc:"Work items kept queued per config, the one running included (default 3)." minimum:"0"`
	// MaxQueued caps the items queued across the cluster: when the configs
	// want more, the ones with the highest priority are served first. The
	// default is the seed's queue-depth alert threshold, so the populator
	// alone never raises that alert.
	MaxQueued       int           `json:"max_queued,omitempty" doc:"Items queued across all configs at most (default 20)." minimum:"0"`
	StarvationAfter time.Duration `json:"starvation_after,omitempty" doc:"A config whose last work ended this long ago (or that never ran) gets starvation_boost, in ns (default 4h)." minimum:"0"`
	StarvationBoost float64       `json:"starvation_boost,omitempty" doc:"Priority multiplier of a starved config (default 3)." minimum:"0"`
	VelocityScale   float64       `json:"velocity_scale,omitempty" doc:"Elo/day that doubles a config's priority (default 10)." minimum:"0"`
}

// WithDefaults fills zero fields.
func (t PopulatorTuning) WithDefaults() PopulatorTuning {
	if t.Mix == (Mix{}) {
		t.Mix = DefaultMix
	}
	if t.Depth <= 0 {
		t.Depth = 3
	}
	if t.MaxQueued <= 0 {
		t.MaxQueued = 20
	}
	if t.StarvationAfter <= 0 {
		t.StarvationAfter = 4 * time.Hour
	}
	if t.StarvationBoost <= 0 {
		t.StarvationBoost = 3
	}
	if t.VelocityScale <= 0 {
		t.VelocityScale = 10
	}
	return t
}

// Validate checks tuning after WithDefaults.
func (t PopulatorTuning) Validate() error {
	m := t.Mix
	if m.Selfplay < 0 || m.Training < 0 || m.Tournament < 0 {
		return fmt.Errorf("mix: shares must not be negative")
	}
	if s := m.Selfplay + m.Training + m.Tournament; s < 0.999 || s > 1.001 {
		return fmt.Errorf("mix: shares sum to %.3f, not 1", s)
	}
	if m.Selfplay == 0 {
		return fmt.Errorf("mix: self-play must have a share (nothing else can run without it)")
	}
	return nil
}

// Config is what the populator knows of one config's loop.
type Config struct {
	Config    string  `json:"config"`
	Weight    float64 `json:"weight,omitempty"`
	TargetElo float64 `json:"target_elo,omitempty"`
	// Done counts the work the loop finished (skipped items excluded).
	Done Counts `json:"done"`
	// Queue is the loop's work not finished, the running item first.
	Queue []string `json:"queue"`
	// Fresh: the loop has exports no training used yet; Candidate: it has
	// a trained model no tournament rated yet (before the queue runs).
	Fresh     int     `json:"fresh"`
	Candidate bool    `json:"candidate"`
	BestElo   float64 `json:"best_elo,omitempty"`
	HasBest   bool    `json:"has_best,omitempty"`
	Velocity  float64 `json:"velocity"`
	// LastWork is when its last item ended (zero: never).
	LastWork time.Time `json:"last_work,omitempty"`
	// Closed, when set, says why the config gets no work (its loop ended
	// or could not start).
	Closed string `json:"closed,omitempty"`
}

// Met reports whether the config's best reached its Elo target.
func (c Config) Met() bool { return c.TargetElo > 0 && c.HasBest && c.BestElo >= c.TargetElo }

// Plan is the populator's view of one config after a decision.
type Plan struct {
	Config   string  `json:"config"`
	Priority float64 `json:"priority"`
	Why      string  `json:"why"`
	// State: populating, met (Elo target reached), closed.
	State  string `json:"state" enum:"populating,met,closed"`
	Target Mix    `json:"target"`
	Actual Mix    `json:"actual" doc:"Share of each kind among the work done and queued."`
	Done   Counts `json:"done"`
	Queued Counts `json:"queued"`
}

// Decision is one item to queue.
type Decision struct {
	Config string `json:"config"`
	Kind   string `json:"kind"`
	Why    string `json:"why"`
}

// Next is the kind of work to queue after done and queue: the kind whose
// share falls furthest below its target once one more item is counted,
// among the kinds that can run (training needs an export no training used
// yet, a tournament a candidate no tournament rated yet — both counted
// through the queue as it will run). Ties go to self-play, then training.
func Next(c Config, mix Mix) (string, string) {
	fresh, cand := c.Fresh, c.Candidate
	counts := Counts{}
	for k, n := range c.Done {
		counts[k] = n
	}
	for _, k := range c.Queue {
		counts[k]++
		switch k {
		case Selfplay:
			fresh++
		case Training:
			if fresh > 0 {
				fresh, cand = 0, true
			}
		case Tournament:
			cand = false
		}
	}
	total := float64(counts.Total() + 1)
	best, bestDeficit := "", 0.0
	for _, k := range Kinds {
		switch {
		case k == Training && fresh == 0, k == Tournament && !cand:
			continue
		}
		d := mix.Of(k)*total - float64(counts[k])
		if best == "" || d > bestDeficit+1e-9 {
			best, bestDeficit = k, d
		}
	}
	why := fmt.Sprintf("%s has %d of %d items, target %.0f%%", best, counts[best], counts.Total(), 100*mix.Of(best))
	if counts.Total() == 0 {
		why = "first work: self-play"
	}
	return best, why
}

// Priority scores a config for the queue's free places: weight × (1 +
// max(0, velocity)/scale), × the starvation boost when its last work ended
// StarvationAfter ago or it never had any.
func Priority(c Config, now time.Time, t PopulatorTuning) (float64, string) {
	w := c.Weight
	if w <= 0 {
		w = 1
	}
	why := []string{fmt.Sprintf("weight %.2f", w)}
	p := w * (1 + max(0, c.Velocity)/t.VelocityScale)
	if c.Velocity != 0 {
		why = append(why, fmt.Sprintf("velocity %.1f Elo/day", c.Velocity))
	}
	switch {
	case c.LastWork.IsZero():
		p *= t.StarvationBoost
		why = append(why, "never ran: boosted")
	case now.Sub(c.LastWork) >= t.StarvationAfter:
		p *= t.StarvationBoost
		why = append(why, fmt.Sprintf("starved %v: boosted", now.Sub(c.LastWork).Round(time.Minute)))
	}
	return p, strings.Join(why, ", ")
}

// Populate decides what to queue: configs that met their target or are
// closed get nothing; the others, highest priority first (ties by name),
// get one item per round until each holds Depth items or the cluster
// holds MaxQueued.
func Populate(cfgs []Config, now time.Time, t PopulatorTuning) ([]Plan, []Decision) {
	t = t.WithDefaults()
	plans := make([]Plan, len(cfgs))
	work := make([]Config, len(cfgs))
	queued := 0
	var open []int
	for i, c := range cfgs {
		work[i] = c
		work[i].Queue = append([]string(nil), c.Queue...)
		queued += len(c.Queue)
		p := Plan{Config: c.Config, Target: t.Mix, Done: c.Done}
		switch {
		case c.Met():
			p.State, p.Why = "met", fmt.Sprintf("Elo target met: best %.0f ≥ %.0f", c.BestElo, c.TargetElo)
		case c.Closed != "":
			p.State, p.Why = "closed", c.Closed
		default:
			p.State = "populating"
			p.Priority, p.Why = Priority(c, now, t)
			open = append(open, i)
		}
		plans[i] = p
	}
	sort.SliceStable(open, func(a, b int) bool {
		pa, pb := plans[open[a]].Priority, plans[open[b]].Priority
		if pa != pb {
			return pa > pb
		}
		return cfgs[open[a]].Config < cfgs[open[b]].Config
	})
	var out []Decision
	for progress := true; progress && queued < t.MaxQueued; {
		progress = false
		for _, i := range open {
			if queued >= t.MaxQueued {
				break
			}
			if len(work[i].Queue) >= t.Depth {
				continue
			}
			k, why := Next(work[i], t.Mix)
			work[i].Queue = append(work[i].Queue, k)
			out = append(out, Decision{Config: cfgs[i].Config, Kind: k, Why: why})
			queued++
			progress = true
		}
	}
	for i := range plans {
		q := Counts{}
		all := Counts{}
		for k, n := range cfgs[i].Done {
			all[k] = n
		}
		for _, k := range work[i].Queue {
			q[k]++
			all[k]++
		}
		plans[i].Queued, plans[i].Actual = q, all.Share()
		if plans[i].Done == nil {
			plans[i].Done = Counts{}
		}
	}
	return plans, out
}
