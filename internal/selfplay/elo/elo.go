// Package elo keeps Elo ratings per game config and model, the match
// history behind them, and Elo velocity (how fast a config's best rating
// climbs, in Elo per day). Pure data: the self-play workflow holds a Table
// in its state, so everything here is deterministic.
package elo

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Defaults.
const (
	DefaultK       = 32
	DefaultInitial = 1500
	// RandomAnchor is the fixed rating of the uniform-random baseline, so
	// ratings of one config stay comparable across generations.
	RandomAnchor = 1000
	// maxHistory bounds the matches a Table keeps per config.
	maxHistory = 500
)

// Baseline players every config has.
const (
	Random    = "random"
	Heuristic = "heuristic"
)

// Expected is the expected score of a player rated ra against rb.
func Expected(ra, rb float64) float64 {
	return 1 / (1 + math.Pow(10, (rb-ra)/400))
}

// Rating is one model's standing in one config.
type Rating struct {
	Model   string    `json:"model"`
	Elo     float64   `json:"elo"`
	Games   int       `json:"games"`
	Wins    int       `json:"wins"`
	Draws   int       `json:"draws"`
	Losses  int       `json:"losses"`
	Anchor  bool      `json:"anchor,omitempty" doc:"A fixed-rating baseline."`
	Best    bool      `json:"best,omitempty" doc:"The config's current best model."`
	Updated time.Time `json:"updated"`
}

// Match is a series of games between two players of one config, A's
// results counted.
type Match struct {
	Config     string    `json:"config"`
	A          string    `json:"a"`
	B          string    `json:"b"`
	Wins       int       `json:"wins"`
	Draws      int       `json:"draws"`
	Losses     int       `json:"losses"`
	Generation int       `json:"generation,omitempty"`
	At         time.Time `json:"at"`
	// Filled in by Record: ratings before, and A's change.
	EloA   float64 `json:"elo_a"`
	EloB   float64 `json:"elo_b"`
	DeltaA float64 `json:"delta_a"`
}

// Games is the series length.
func (m Match) Games() int { return m.Wins + m.Draws + m.Losses }

// Score is A's score share: wins plus half the draws, over the games.
func (m Match) Score() float64 {
	if m.Games() == 0 {
		return 0
	}
	return (float64(m.Wins) + 0.5*float64(m.Draws)) / float64(m.Games())
}

// Point is a config's best rating at a moment, for velocity.
type Point struct {
	At    time.Time `json:"at"`
	Model string    `json:"model"`
	Elo   float64   `json:"elo"`
}

// ConfigRatings is one game config's table.
type ConfigRatings struct {
	Ratings map[string]*Rating `json:"ratings"`
	History []Match            `json:"history"`
	BestLog []Point            `json:"best_log"`
	Best    string             `json:"best,omitempty"`
}

// Table is every config's ratings.
type Table struct {
	K       float64                   `json:"k"`
	Configs map[string]*ConfigRatings `json:"configs"`
}

// New is an empty table with K-factor k (DefaultK when 0).
func New(k float64) *Table {
	if k <= 0 {
		k = DefaultK
	}
	return &Table{K: k, Configs: map[string]*ConfigRatings{}}
}

func (t *Table) config(name string) *ConfigRatings {
	if t.Configs == nil {
		t.Configs = map[string]*ConfigRatings{}
	}
	c := t.Configs[name]
	if c == nil {
		c = &ConfigRatings{Ratings: map[string]*Rating{}}
		t.Configs[name] = c
	}
	return c
}

// Get returns a model's rating, creating it: the random baseline at its
// anchor, a new model at the config's best rating (it starts as good as
// what it was trained from), anything else at DefaultInitial.
func (t *Table) Get(config, model string) *Rating {
	c := t.config(config)
	if r := c.Ratings[model]; r != nil {
		return r
	}
	r := &Rating{Model: model, Elo: DefaultInitial}
	switch {
	case model == Random:
		r.Elo, r.Anchor = RandomAnchor, true
	case c.Best != "" && c.Ratings[c.Best] != nil:
		r.Elo = c.Ratings[c.Best].Elo
	}
	c.Ratings[model] = r
	return r
}

// Record applies a match: both sides move by K·(S − E) per game, summed
// over the series (anchored baselines stay), and the match joins the
// history. It returns the match with ratings before and A's change.
func (t *Table) Record(m Match) (Match, error) {
	if m.A == m.B || m.A == "" || m.B == "" {
		return m, fmt.Errorf("elo: match needs two different players, got %q and %q", m.A, m.B)
	}
	if m.Wins < 0 || m.Draws < 0 || m.Losses < 0 || m.Games() == 0 {
		return m, fmt.Errorf("elo: match %s vs %s has no games (%d/%d/%d)", m.A, m.B, m.Wins, m.Draws, m.Losses)
	}
	c := t.config(m.Config)
	a, b := t.Get(m.Config, m.A), t.Get(m.Config, m.B)
	n := float64(m.Games())
	e := Expected(a.Elo, b.Elo)
	delta := t.K * n * (m.Score() - e)
	m.EloA, m.EloB, m.DeltaA = a.Elo, b.Elo, delta
	if !a.Anchor {
		a.Elo += delta
	}
	if !b.Anchor {
		b.Elo -= delta
	}
	a.Games, a.Wins, a.Draws, a.Losses = a.Games+m.Games(), a.Wins+m.Wins, a.Draws+m.Draws, a.Losses+m.Losses
	b.Games, b.Wins, b.Draws, b.Losses = b.Games+m.Games(), b.Wins+m.Losses, b.Draws+m.Draws, b.Losses+m.Wins
	a.Updated, b.Updated = m.At, m.At
	c.History = append(c.History, m)
	if len(c.History) > maxHistory {
		c.History = append([]Match(nil), c.History[len(c.History)-maxHistory:]...)
	}
	if best := c.Ratings[c.Best]; best != nil && (best == a || best == b) {
		t.logBest(c, m.At)
	}
	return m, nil
}

// Promote makes model the config's best.
func (t *Table) Promote(config, model string, at time.Time) {
	c := t.config(config)
	t.Get(config, model)
	if old := c.Ratings[c.Best]; old != nil {
		old.Best = false
	}
	c.Best = model
	c.Ratings[model].Best = true
	t.logBest(c, at)
}

func (t *Table) logBest(c *ConfigRatings, at time.Time) {
	r := c.Ratings[c.Best]
	c.BestLog = append(c.BestLog, Point{At: at, Model: r.Model, Elo: r.Elo})
	if len(c.BestLog) > maxHistory {
		c.BestLog = append([]Point(nil), c.BestLog[len(c.BestLog)-maxHistory:]...)
	}
}

// BestModel is the config's best model ("" before a promotion).
func (t *Table) BestModel(config string) string {
	if c := t.Configs[config]; c != nil {
		return c.Best
	}
	return ""
}

// Leaderboard is a config's ratings, highest first (ties by name).
func (t *Table) Leaderboard(config string) []Rating {
	c := t.Configs[config]
	if c == nil {
		return []Rating{}
	}
	out := make([]Rating, 0, len(c.Ratings))
	for _, r := range c.Ratings {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Elo != out[j].Elo {
			return out[i].Elo > out[j].Elo
		}
		return out[i].Model < out[j].Model
	})
	return out
}

// History is a config's matches, oldest first.
func (t *Table) History(config string) []Match {
	if c := t.Configs[config]; c != nil {
		return c.History
	}
	return nil
}

// MinVelocitySpan is the least history a velocity is reported over: the
// slope of a few minutes' ratings, extrapolated to a day, read 482,061.7
// Elo/day on a loop 20 minutes old.
const MinVelocitySpan = time.Hour

// Velocity is how fast the config's best rating rose over the window
// ending at now, in Elo per day: the least-squares slope of its best-model
// log inside the window. ok is false (and the velocity 0) while the points
// in the window span less than MinVelocitySpan: too early to say.
func (t *Table) Velocity(config string, now time.Time, window time.Duration) (perDay float64, ok bool) {
	c := t.Configs[config]
	if c == nil {
		return 0, false
	}
	v, span := Velocity(c.BestLog, now, window)
	if span < MinVelocitySpan {
		return 0, false
	}
	return v, true
}

// Velocity is the least-squares slope, in Elo per day, of points inside
// (now−window, now], and the time those points span (0 with fewer than two
// points or no time span).
func Velocity(points []Point, now time.Time, window time.Duration) (perDay float64, span time.Duration) {
	var xs, ys []float64
	var first, last time.Time
	for _, p := range points {
		if p.At.After(now) || !p.At.After(now.Add(-window)) {
			continue
		}
		if first.IsZero() || p.At.Before(first) {
			first = p.At
		}
		if p.At.After(last) {
			last = p.At
		}
		xs = append(xs, p.At.Sub(now).Hours()/24)
		ys = append(ys, p.Elo)
	}
	if len(xs) < 2 {
		return 0, 0
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(xs))
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0, 0
	}
	return sxy / sxx, last.Sub(first)
}
