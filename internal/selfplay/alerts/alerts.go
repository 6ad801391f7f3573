// Package alerts evaluates the seed's alert table (Monitoring & Alerting):
// GPU utilisation below 50% for 30 min, self-play below 20 games/hour per
// node, a work queue deeper than 20, Elo velocity below 1 Elo/day for 3
// days. A condition must hold for its duration before it fires, so the
// tracker remembers since when each one holds; it is plain data, kept in
// the populator workflow's state (and so across restarts).
package alerts

import (
	"fmt"
	"sort"
	"time"
)

// Rules.
const (
	GPUUtil     = "gpu_utilization"
	Throughput  = "selfplay_throughput"
	QueueDepth  = "queue_depth"
	EloVelocity = "elo_velocity"
)

// Thresholds are the alert table; zero fields take the seed's values.
type Thresholds struct {
	GPUUtilBelow      float64       `json:"gpu_util_below,omitempty" doc:"GPU utilisation %, default 50."`
	GPUUtilFor        time.Duration `json:"gpu_util_for,omitempty" doc:"In ns, default 30m."`
	GamesPerHourBelow float64       `json:"games_per_hour_below,omitempty" doc:"Self-play games/hour per node, default 20."`
	QueueDepthAbove   int           `json:"queue_depth_above,omitempty" doc:"Queued work items, default 20."`
	EloVelocityBelow  float64       `json:"elo_velocity_below,omitempty" doc:"Elo/day, default 1."`
	EloVelocityFor    time.Duration `json:"elo_velocity_for,omitempty" doc:"In ns, default 72h."`
}

// WithDefaults fills zero fields.
func (t Thresholds) WithDefaults() Thresholds {
	if t.GPUUtilBelow == 0 {
		t.GPUUtilBelow = 50
	}
	if t.GPUUtilFor == 0 {
		t.GPUUtilFor = 30 * time.Minute
	}
	if t.GamesPerHourBelow == 0 {
		t.GamesPerHourBelow = 20
	}
	if t.QueueDepthAbove == 0 {
		t.QueueDepthAbove = 20
	}
	if t.EloVelocityBelow == 0 {
		t.EloVelocityBelow = 1
	}
	if t.EloVelocityFor == 0 {
		t.EloVelocityFor = 72 * time.Hour
	}
	return t
}

// Sample is one measured value of a rule for a subject (a GPU, a node, a
// cluster's queue, a config).
type Sample struct {
	Rule    string  `json:"rule"`
	Subject string  `json:"subject"`
	Value   float64 `json:"value"`
}

// Alert is a condition that holds.
type Alert struct {
	Rule      string    `json:"rule" enum:"gpu_utilization,selfplay_throughput,queue_depth,elo_velocity"`
	Subject   string    `json:"subject" doc:"GPU (node/index), node, cluster or config."`
	Condition string    `json:"condition" example:"Elo velocity < 1 Elo/day for 72h0m0s"`
	Value     float64   `json:"value" doc:"The latest measured value."`
	Since     time.Time `json:"since" doc:"Since when the condition holds."`
	// State: firing once it held for the rule's duration, pending before.
	State string `json:"state" enum:"firing,pending"`
}

// Tracker remembers since when each condition holds, by rule and subject.
type Tracker map[string]time.Time

// rule is one row of the table.
type rule struct {
	cond     string
	breached func(float64) bool
	dur      time.Duration
}

func table(t Thresholds) map[string]rule {
	return map[string]rule{
		GPUUtil:     {fmt.Sprintf("GPU utilisation < %.0f%% for %v", t.GPUUtilBelow, t.GPUUtilFor), func(v float64) bool { return v < t.GPUUtilBelow }, t.GPUUtilFor},
		Throughput:  {fmt.Sprintf("self-play < %.0f games/hour/node", t.GamesPerHourBelow), func(v float64) bool { return v < t.GamesPerHourBelow }, 0},
		QueueDepth:  {fmt.Sprintf("queue depth > %d", t.QueueDepthAbove), func(v float64) bool { return v > float64(t.QueueDepthAbove) }, 0},
		EloVelocity: {fmt.Sprintf("Elo velocity < %g Elo/day for %v", t.EloVelocityBelow, t.EloVelocityFor), func(v float64) bool { return v < t.EloVelocityBelow }, t.EloVelocityFor},
	}
}

// Observe records the samples taken at now: a condition that holds keeps
// (or starts) its clock, one that does not hold or was not measured
// forgets it. It returns every condition that holds, firing ones first,
// then by rule and subject.
func (tr Tracker) Observe(samples []Sample, now time.Time, th Thresholds) []Alert {
	rules := table(th.WithDefaults())
	seen := map[string]bool{}
	out := []Alert{}
	for _, s := range samples {
		r, ok := rules[s.Rule]
		if !ok {
			continue
		}
		key := s.Rule + " " + s.Subject
		if !r.breached(s.Value) {
			continue
		}
		seen[key] = true
		since, ok := tr[key]
		if !ok {
			since = now
			tr[key] = now
		}
		a := Alert{Rule: s.Rule, Subject: s.Subject, Condition: r.cond, Value: s.Value, Since: since, State: "pending"}
		if now.Sub(since) >= r.dur {
			a.State = "firing"
		}
		out = append(out, a)
	}
	for k := range tr {
		if !seen[k] {
			delete(tr, k)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].State != out[j].State {
			return out[i].State == "firing"
		}
		if out[i].Rule != out[j].Rule {
			return out[i].Rule < out[j].Rule
		}
		return out[i].Subject < out[j].Subject
	})
	return out
}
