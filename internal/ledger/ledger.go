// Package ledger is the usage ledger: which work held which node's GPUs
// from when to when, kept by the cluster workflow from its allocations and
// releases, and summed over the quota window for admission (quotas,
// one-training-per-config) and for `GET /v1/usage`. It is plain data and
// arithmetic: time is passed in, so it is safe in workflow code.
package ledger

import (
	"sort"
	"strconv"
	"time"

	"github.com/trainyard/trainyard/internal/policy/params"
)

// Entry is one role instance's hold on a node. End is zero while it runs.
type Entry struct {
	WorkID   string `json:"work_id"`
	Config   string `json:"config,omitempty"`
	Kind     string `json:"kind"`
	Role     string `json:"role,omitempty"`
	Node     string `json:"node"`
	Provider string `json:"provider,omitempty"`
	// NodeVRAMMB is the node's total VRAM when the work was placed: the
	// tier is derived from it with the params in force when summed.
	NodeVRAMMB int       `json:"node_vram_mb,omitempty"`
	GPUs       float64   `json:"gpus"` // devices held (fractions allowed)
	Start      time.Time `json:"start"`
	End        time.Time `json:"end,omitzero"`
}

// Running says whether the record is still open.
func (r Entry) Running() bool { return r.End.IsZero() }

// Book is the records of one cluster, oldest first.
type Book struct {
	Records []Entry `json:"records,omitempty"`
}

// MaxRecords bounds the book: the oldest ended records go first.
const MaxRecords = 2000

// Open adds records (one per placed role instance).
func (b *Book) Open(rs ...Entry) { b.Records = append(b.Records, rs...) }

// Close ends the open records of a work (released), or of every work on a
// node (the node died) when node is set.
func (b *Book) Close(workID, node string, now time.Time) {
	for i := range b.Records {
		r := &b.Records[i]
		if r.Running() && ((workID != "" && r.WorkID == workID) || (node != "" && r.Node == node)) {
			r.End = now
		}
	}
}

// Prune drops ended records that ended before now-keep, and the oldest
// ended ones beyond MaxRecords.
func (b *Book) Prune(now time.Time, keep time.Duration) {
	from := now.Add(-keep)
	out := b.Records[:0]
	for _, r := range b.Records {
		if r.Running() || r.End.After(from) {
			out = append(out, r)
		}
	}
	for i := 0; len(out) > MaxRecords && i < len(out); {
		if !out[i].Running() {
			out = append(out[:i], out[i+1:]...)
			continue
		}
		i++
	}
	b.Records = out
}

// Summary is the ledger summed over the quota window ending at At.
type Summary struct {
	At          time.Time `json:"at"`
	WindowHours float64   `json:"window_hours"`
	// GPU-seconds inside the window, by work config, kind, GPU tier of the
	// node ("1".."n", "none" for nodes below every tier) and provider.
	GPUSecondsByConfig   map[string]float64 `json:"gpu_seconds_by_config"`
	GPUSecondsByKind     map[string]float64 `json:"gpu_seconds_by_kind"`
	GPUSecondsByTier     map[string]float64 `json:"gpu_seconds_by_tier"`
	GPUSecondsByProvider map[string]float64 `json:"gpu_seconds_by_provider"`
	// Tier1GPUSecondsByConfig is what config quotas are measured in.
	Tier1GPUSecondsByConfig map[string]float64 `json:"tier1_gpu_seconds_by_config"`
	// RunningTrainingByConfig counts running training works per config.
	RunningTrainingByConfig map[string]int `json:"running_training_by_config"`
	// Running are the works holding resources now, one entry per work.
	Running []RunningWork `json:"running"`
}

// RunningWork is one work that holds resources now.
type RunningWork struct {
	WorkID  string    `json:"work_id"`
	Kind    string    `json:"kind"`
	Config  string    `json:"config,omitempty"`
	Nodes   []string  `json:"nodes"`
	GPUs    float64   `json:"gpus"`
	Since   time.Time `json:"since"`
	Seconds int64     `json:"seconds"`
}

// Quota is what admission reads from the book: each config's Tier-1
// GPU-seconds inside the window and its running trainings. It is summed
// for every decision, so it skips the breakdowns Sum makes for people.
type Quota struct {
	Tier1GPUSecondsByConfig map[string]float64
	RunningTrainingByConfig map[string]int
}

// Quota sums the book for admission over p's quota window ending at now.
func (b *Book) Quota(p params.Params, now time.Time) Quota {
	from := now.Add(-p.QuotaWindow())
	q := Quota{Tier1GPUSecondsByConfig: map[string]float64{}, RunningTrainingByConfig: map[string]int{}}
	var training map[string]string // running training work -> config
	lastVRAM, lastTier1 := -1, false
	for i := range b.Records {
		r := &b.Records[i]
		end := r.End
		if r.Running() {
			end = now
			if OneTrainingKind(r.Kind) {
				if training == nil {
					training = map[string]string{}
				}
				training[r.WorkID] = r.Config
			}
		}
		if r.GPUs == 0 || !end.After(from) {
			continue
		}
		if r.NodeVRAMMB != lastVRAM { // entries come in runs of similar nodes
			lastVRAM, lastTier1 = r.NodeVRAMMB, p.TierOf(r.NodeVRAMMB) == 1
		}
		if !lastTier1 {
			continue
		}
		start := r.Start
		if start.Before(from) {
			start = from
		}
		if d := end.Sub(start); d > 0 {
			q.Tier1GPUSecondsByConfig[r.Config] += d.Seconds() * r.GPUs
		}
	}
	for _, config := range training {
		q.RunningTrainingByConfig[config]++
	}
	return q
}

// Tier is the tier label a node's total VRAM reaches under p.
func Tier(p params.Params, vramMB int) string {
	if t := p.TierOf(vramMB); t > 0 {
		return strconv.Itoa(t)
	}
	return "none"
}

// OneTrainingKind says whether running work of a kind counts toward one
// training per config: trainings do; sweep trials, which also train
// (workspec.Trains), run many at once by design and do not.
func OneTrainingKind(kind string) bool { return kind == "training" }

// Sum totals the book over p's quota window ending at now.
func (b *Book) Sum(p params.Params, now time.Time) Summary {
	window := p.QuotaWindow()
	from := now.Add(-window)
	s := Summary{
		At: now, WindowHours: window.Hours(),
		GPUSecondsByConfig: map[string]float64{}, GPUSecondsByKind: map[string]float64{}, GPUSecondsByTier: map[string]float64{},
		GPUSecondsByProvider: map[string]float64{}, Tier1GPUSecondsByConfig: map[string]float64{}, RunningTrainingByConfig: map[string]int{},
		Running: []RunningWork{},
	}
	running := map[string]*RunningWork{}
	for _, r := range b.Records {
		end := r.End
		if r.Running() {
			end = now
			w := running[r.WorkID]
			if w == nil {
				w = &RunningWork{WorkID: r.WorkID, Kind: r.Kind, Config: r.Config, Since: r.Start}
				running[r.WorkID] = w
			}
			w.Nodes = appendOnce(w.Nodes, r.Node)
			w.GPUs += r.GPUs
			if r.Start.Before(w.Since) {
				w.Since = r.Start
			}
		}
		start := r.Start
		if start.Before(from) {
			start = from
		}
		d := end.Sub(start).Seconds() * r.GPUs
		if d <= 0 {
			continue
		}
		s.GPUSecondsByConfig[r.Config] += d
		s.GPUSecondsByKind[r.Kind] += d
		tier := Tier(p, r.NodeVRAMMB)
		s.GPUSecondsByTier[tier] += d
		s.GPUSecondsByProvider[r.Provider] += d
		if tier == "1" {
			s.Tier1GPUSecondsByConfig[r.Config] += d
		}
	}
	for _, w := range running {
		w.Seconds = int64(now.Sub(w.Since).Seconds())
		if OneTrainingKind(w.Kind) {
			s.RunningTrainingByConfig[w.Config]++
		}
		s.Running = append(s.Running, *w)
	}
	sort.Slice(s.Running, func(i, j int) bool { return s.Running[i].WorkID < s.Running[j].WorkID })
	return s
}

func appendOnce(xs []string, x string) []string {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}
