package learner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Metrics is one iteration of any algorithm. The fields are what every
// algorithm reports and the platform reads (targets, progress, sweeps);
// Values are the algorithm's own numbers by name. In JSON both sit in one
// flat object, so a curve's tag is its key either way and the histories
// of runs recorded before the learner interface decode unchanged.
type Metrics struct {
	Iteration int64 `json:"iteration"`
	Timesteps int64 `json:"timesteps"`
	// Episodes finished during this iteration and their undiscounted
	// returns (zero when none finished).
	Episodes          int     `json:"episodes"`
	EpisodeReturnMean float64 `json:"episode_return_mean"`
	EpisodeReturnMin  float64 `json:"episode_return_min"`
	EpisodeReturnMax  float64 `json:"episode_return_max"`
	EpisodeLengthMean float64 `json:"episode_length_mean"`
	// RecentReturnMean is the algorithm's measure of its policy, the one
	// targets, "best" checkpoints and sweeps read (mean_return): PPO's
	// mean of the last 100 training episodes, DQN's latest greedy
	// evaluation; RecentEpisodes is how many episodes it averages.
	RecentReturnMean float64 `json:"recent_return_mean"`
	RecentEpisodes   int     `json:"recent_episodes"`
	// StepsPerSecond is env steps over the iteration's wall time.
	StepsPerSecond float64 `json:"steps_per_second"`
	// Rollouts name the fragments a distributed iteration learnt from
	// (absent when the learner stepped its own envs).
	Rollouts []RolloutInfo `json:"rollouts,omitempty"`
	// Values are the algorithm's own metrics (policy_loss, q_loss,
	// epsilon, ...), flat beside the fields above in JSON.
	Values map[string]float64 `json:"-"`
}

// RolloutInfo says who produced one fragment of an iteration.
type RolloutInfo struct {
	Worker        int    `json:"worker"`
	Node          string `json:"node,omitempty"`
	WeightVersion int64  `json:"weight_version"`
	Steps         int    `json:"steps"`
	Episodes      int    `json:"episodes"`
	// StepsPerSecond is the worker's rollout speed.
	StepsPerSecond float64 `json:"steps_per_second"`
}

// Value is the named metric, a field's or the algorithm's own, and
// whether the iteration has it.
func (m Metrics) Value(name string) (float64, bool) {
	switch name {
	case "iteration":
		return float64(m.Iteration), true
	case "timesteps":
		return float64(m.Timesteps), true
	case "episodes":
		return float64(m.Episodes), true
	case "episode_return_mean":
		return m.EpisodeReturnMean, m.Episodes > 0
	case "episode_return_min":
		return m.EpisodeReturnMin, m.Episodes > 0
	case "episode_return_max":
		return m.EpisodeReturnMax, m.Episodes > 0
	case "episode_length_mean":
		return m.EpisodeLengthMean, m.Episodes > 0
	case "recent_return_mean":
		// A curve from the first iteration on (0 before any episode).
		return m.RecentReturnMean, true
	case "mean_return":
		return m.RecentReturnMean, m.RecentEpisodes > 0
	case "recent_episodes":
		return float64(m.RecentEpisodes), true
	case "steps_per_second":
		return m.StepsPerSecond, true
	}
	v, ok := m.Values[name]
	return v, ok
}

// Names are the iteration's metric names: the fields', then the
// algorithm's own, sorted.
func (m Metrics) Names() []string {
	out := []string{"recent_return_mean", "recent_episodes", "episode_return_mean", "episode_return_min",
		"episode_return_max", "episode_length_mean", "episodes", "timesteps", "steps_per_second"}
	return append(out, slices.Sorted(maps.Keys(m.Values))...)
}

// fields is Metrics without its methods, for the default encoding.
type fields Metrics

var fieldNames = func() map[string]bool {
	b, _ := json.Marshal(fields{Rollouts: []RolloutInfo{{}}})
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}()

// MarshalJSON writes the fields and then the algorithm's values (sorted;
// a non-finite one, which JSON cannot hold, is left out).
func (m Metrics) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(fields(m))
	if err != nil {
		return nil, err
	}
	if len(m.Values) == 0 {
		return b, nil
	}
	var buf bytes.Buffer
	buf.Write(b[:len(b)-1])
	for _, k := range slices.Sorted(maps.Keys(m.Values)) {
		v := m.Values[k]
		if fieldNames[k] || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(v)
		buf.WriteByte(',')
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(vb)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads the fields; every other number is a value.
func (m *Metrics) UnmarshalJSON(b []byte) error {
	var f fields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for k, raw := range all {
		if fieldNames[k] {
			continue
		}
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("metric %q: %w", k, err)
		}
		if f.Values == nil {
			f.Values = map[string]float64{}
		}
		f.Values[k] = v
	}
	*m = Metrics(f)
	return nil
}

// brief are the algorithms' own metrics a one-line summary shows, in
// order, with their short names (absent ones are skipped).
var brief = []struct{ name, short, format string }{
	{"policy_loss", "pg", "%.4f"}, {"value_loss", "vf", "%.4f"}, {"approx_kl", "kl", "%.5f"}, {"entropy", "ent", "%.4f"},
	{"q_loss", "q_loss", "%.4f"}, {"q_mean", "q", "%.2f"}, {"epsilon", "eps", "%.3f"},
}

// Brief is the algorithm's headline metrics as "pg 0.0123  vf 0.4567 ...",
// for log lines ("" when it has none of them).
func (m Metrics) Brief() string {
	var parts []string
	for _, b := range brief {
		if v, ok := m.Values[b.name]; ok {
			parts = append(parts, b.short+" "+fmt.Sprintf(b.format, v))
		}
	}
	return strings.Join(parts, "  ")
}
