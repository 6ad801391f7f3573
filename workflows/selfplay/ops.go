package selfplay

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/trainyard/trainyard/internal/selfplay/catalog"
	"github.com/trainyard/trainyard/internal/selfplay/elo"
)

// What operators read about self-play across loops (GET /v1/selfplay/
// configs, /v1/selfplay/datasets, /v1/queue/status): computed here from
// the loops' states, which the API only fetches.

// OpsLoop is a loop as the operations views read it: who it is, whether
// it runs, its state.
type OpsLoop struct {
	ID, Cluster, Config string // ID: CLUSTER/CONFIG
	Running             bool
	State               State
}

// velocityWindow is the span Elo velocity is measured over.
const velocityWindow = 7 * 24 * time.Hour

// Velocity is a config's Elo/day in t over the last week, or 0 and why
// there is none yet (never extrapolated from minutes).
func Velocity(t *elo.Table, config string, now time.Time) (perDay float64, note string) {
	if v, ok := t.Velocity(config, now, velocityWindow); ok {
		return v, ""
	}
	return 0, fmt.Sprintf("too early: velocity needs %v of the best model's rating history", elo.MinVelocitySpan)
}

// ConfigEntry is one config of the catalogue.
type ConfigEntry struct {
	catalog.Entry
	MinVRAMMB    int      `json:"min_vram_mb"`
	Weight       float64  `json:"weight" doc:"Curriculum weight given by a running populator or scheduler (1 when none names the config)."`
	Games        int      `json:"games" doc:"Self-play games played so far by its loops."`
	Best         string   `json:"best,omitempty"`
	Elo          float64  `json:"elo,omitempty" doc:"Rating of its best model (the highest among its loops)."`
	Velocity     float64  `json:"elo_velocity" doc:"Elo/day of that best model over the last 7 days (0 while too early: see elo_velocity_note)."`
	VelocityNote string   `json:"elo_velocity_note,omitempty" doc:"Why there is no velocity yet: the best model's history spans less than an hour."`
	Loops        []string `json:"loops,omitempty" doc:"Its loops (CLUSTER/CONFIG), newest first."`
}

// Catalogue is every config of the catalogue with its curriculum weight
// (weights: what running populators and schedulers give; 1 otherwise), the
// games its loops played and its best model's rating and velocity.
func Catalogue(loops []OpsLoop, weights map[string]float64, now time.Time) []ConfigEntry {
	out := []ConfigEntry{}
	for _, c := range catalog.Configs() {
		e := ConfigEntry{Entry: c, MinVRAMMB: c.MinGB * 1024, Weight: 1}
		if w, ok := weights[c.Config]; ok {
			e.Weight = w
		}
		for _, l := range loops {
			if l.Config != c.Config {
				continue
			}
			st := l.State
			e.Loops = append(e.Loops, l.ID)
			e.Games += st.TotalGames
			if st.Best != "" && st.Elo != nil {
				if r := st.Elo.Get(l.Config, st.Best).Elo; e.Best == "" || r > e.Elo {
					e.Best, e.Elo = st.Best, r
					e.Velocity, e.VelocityNote = Velocity(st.Elo, l.Config, now)
				}
			}
		}
		out = append(out, e)
	}
	return out
}

// GenerationData is one generation's objects in S3.
type GenerationData struct {
	Generation   int     `json:"generation"`
	State        string  `json:"state,omitempty"`
	Games        int     `json:"games" doc:"Games synced (from the loop's state)."`
	Batches      int     `json:"batches" doc:"Game batch objects."`
	BatchBytes   int64   `json:"batch_bytes"`
	Dataset      string  `json:"dataset,omitempty" doc:"S3 key of the .npz export."`
	DatasetBytes int64   `json:"dataset_bytes,omitempty"`
	Positions    int     `json:"positions,omitempty"`
	Quality      float64 `json:"quality" doc:"The quality gate's score of the batch."`
	Passed       bool    `json:"passed"`
}

// LoopData is a loop's datasets and games.
type LoopData struct {
	ID          string           `json:"id" doc:"CLUSTER/CONFIG."`
	Config      string           `json:"config"`
	Prefix      string           `json:"prefix" doc:"S3 prefix of its objects."`
	Games       int              `json:"games"`
	Batches     int              `json:"batches"`
	BatchBytes  int64            `json:"batch_bytes"`
	Datasets    int              `json:"datasets"`
	DataBytes   int64            `json:"dataset_bytes"`
	Generations []GenerationData `json:"generations" doc:"Oldest first."`
}

// Object is an S3 object as Datasets reads it.
type Object struct {
	Key  string
	Size int64
}

// Datasets sums a loop's objects under its prefix (Prefix(loopID)) by
// generation: game batches, the NPZ export, and from its state the games,
// positions and the quality gate's verdict.
func Datasets(l OpsLoop, loopID string, objects []Object) LoopData {
	d := LoopData{ID: l.ID, Config: l.Config, Prefix: Prefix(loopID), Generations: []GenerationData{}}
	gens := map[int]*GenerationData{}
	get := func(n int) *GenerationData {
		if gens[n] == nil {
			gens[n] = &GenerationData{Generation: n}
		}
		return gens[n]
	}
	for _, o := range objects {
		rest := strings.TrimPrefix(o.Key, d.Prefix)
		var n int
		if _, err := fmt.Sscanf(rest, "gen-%06d/", &n); err != nil {
			continue // models
		}
		g := get(n)
		switch {
		case strings.Contains(rest, "/games/"):
			g.Batches++
			g.BatchBytes += o.Size
		case strings.HasSuffix(rest, ".npz"):
			g.Dataset, g.DatasetBytes = o.Key, o.Size
		}
	}
	for _, gen := range l.State.Generations {
		g := get(gen.N)
		g.State, g.Games, g.Positions, g.Quality, g.Passed = gen.State, gen.Games, gen.Positions, gen.Quality.Score, gen.Quality.Passed
	}
	for _, g := range gens {
		d.Generations = append(d.Generations, *g)
		d.Games += g.Games
		d.Batches += g.Batches
		d.BatchBytes += g.BatchBytes
		if g.Dataset != "" {
			d.Datasets++
			d.DataBytes += g.DatasetBytes
		}
	}
	sort.Slice(d.Generations, func(i, j int) bool { return d.Generations[i].Generation < d.Generations[j].Generation })
	return d
}

// Health is what a daemon's state says of it: its last decision, poll or
// heartbeat, its last error, one line of detail.
type Health struct {
	LastActivity *time.Time
	LastError    string
	Detail       string
}

// Health of a scheduler: its last slice, and whether it failed.
func (st SchedulerState) Health() Health {
	h := Health{Detail: fmt.Sprintf("%s, %d slices", st.Phase, st.Slices)}
	if n := len(st.History); n > 0 {
		last := st.History[n-1]
		h.LastActivity = &last.Ended
		if strings.HasPrefix(last.Result, "failed") {
			h.LastError = last.Config + ": " + last.Result
		}
	}
	return h
}

// Health of an idle-resource daemon: its last event, and the last one
// that went wrong.
func (st IdleState) Health() Health {
	h := Health{Detail: fmt.Sprintf("%s, %d polls, %d GPUs watched, %d loops running", st.Phase, st.Polls, len(st.GPUs), len(st.Running))}
	for _, e := range st.Events {
		h.LastActivity = &e.At
		if strings.HasPrefix(e.What, "cluster status:") || strings.HasPrefix(e.What, "loop ended:") {
			h.LastError = e.What
		}
	}
	return h
}

// Health of a queue populator: its last poll and error.
func (st PopulatorState) Health() Health {
	return Health{LastActivity: st.LastPoll, LastError: st.LastError,
		Detail: fmt.Sprintf("%s, %d polls, %d configs, %d alerts", st.Phase, st.Polls, len(st.Plans), len(st.Alerts))}
}

// Health of a loop's ephemeral sync: the self-play batch's last heartbeat
// and the games it has synced.
func (b *BatchInFlight) Health() Health {
	h := Health{LastActivity: b.LastHeartbeat, LastError: b.LastFailure, Detail: "batch started, no heartbeat yet"}
	if p := b.Progress; p != nil {
		h.Detail = fmt.Sprintf("%d of %d games synced in %d batches", p.Synced, p.Target, p.Batches)
	}
	return h
}
