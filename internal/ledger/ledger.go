// Package ledger is the usage ledger: which work held which node's GPUs
// from when to when, kept by the cluster workflow from its allocations and
// releases, and summed over the quota window for admission (quotas,
// one-training-per-config) and for `GET /v1/usage`. It is plain data and
// arithmetic: time is passed in, so it is safe in workflow code.
package ledger

import (
	"slices"
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
	// Folded are the ended records pruned beyond MaxRecords, summed by the
	// hour they fell in, so the sums over the window keep them: at 100
	// placements a second 2,000 records are 20 s, and quota windows are
	// hours long.
	Folded []Bucket `json:"folded,omitempty"`
	// Folds says pruning folds records into Folded rather than dropping
	// them (a workflow's version decides; books from before dropped them).
	Folds bool `json:"folds,omitempty"`
}

// MaxRecords bounds the book's records: the oldest ended ones go first.
const MaxRecords = 2000

// Bucket is GPU time of ended records inside one hour, with what the sums
// break it down by.
type Bucket struct {
	Hour       time.Time `json:"hour"` // its start, UTC
	Config     string    `json:"config,omitempty"`
	Kind       string    `json:"kind"`
	Provider   string    `json:"provider,omitempty"`
	NodeVRAMMB int       `json:"node_vram_mb,omitempty"`
	GPUSeconds float64   `json:"gpu_seconds"`
}

// fold adds an ended record to the hourly buckets.
func (b *Book) fold(r Entry) {
	if r.GPUs == 0 {
		return
	}
	for t := r.Start; t.Before(r.End); {
		h := t.UTC().Truncate(time.Hour)
		next := h.Add(time.Hour)
		if r.End.Before(next) {
			next = r.End
		}
		i := slices.IndexFunc(b.Folded, func(k Bucket) bool {
			return k.Hour.Equal(h) && k.Config == r.Config && k.Kind == r.Kind && k.Provider == r.Provider && k.NodeVRAMMB == r.NodeVRAMMB
		})
		if i < 0 {
			b.Folded = append(b.Folded, Bucket{Hour: h, Config: r.Config, Kind: r.Kind, Provider: r.Provider, NodeVRAMMB: r.NodeVRAMMB})
			i = len(b.Folded) - 1
		}
		b.Folded[i].GPUSeconds += next.Sub(t).Seconds() * r.GPUs
		t = next
	}
}

// inWindow is the part of a bucket's GPU-seconds inside [from, ...): all
// of it, or for the hour the window begins in, its share of the hour
// (spread evenly: the records are gone).
func (k Bucket) inWindow(from time.Time) float64 {
	end := k.Hour.Add(time.Hour)
	switch {
	case !end.After(from):
		return 0
	case k.Hour.Before(from):
		return k.GPUSeconds * end.Sub(from).Seconds() / time.Hour.Seconds()
	}
	return k.GPUSeconds
}

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
			if b.Folds {
				b.fold(out[i])
			}
			out = append(out[:i], out[i+1:]...)
			continue
		}
		i++
	}
	b.Records = out
	b.Folded = slices.DeleteFunc(b.Folded, func(k Bucket) bool { return !k.Hour.Add(time.Hour).After(from) })
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
	for _, k := range b.Folded {
		if d := k.inWindow(from); d > 0 && p.TierOf(k.NodeVRAMMB) == 1 {
			q.Tier1GPUSecondsByConfig[k.Config] += d
		}
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
		s.add(p, r.Config, r.Kind, r.Provider, r.NodeVRAMMB, end.Sub(start).Seconds()*r.GPUs)
	}
	for _, k := range b.Folded {
		s.add(p, k.Config, k.Kind, k.Provider, k.NodeVRAMMB, k.inWindow(from))
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

// add counts GPU-seconds d in every breakdown.
func (s *Summary) add(p params.Params, config, kind, provider string, vramMB int, d float64) {
	if d <= 0 {
		return
	}
	s.GPUSecondsByConfig[config] += d
	s.GPUSecondsByKind[kind] += d
	tier := Tier(p, vramMB)
	s.GPUSecondsByTier[tier] += d
	s.GPUSecondsByProvider[provider] += d
	if tier == "1" {
		s.Tier1GPUSecondsByConfig[config] += d
	}
}

func appendOnce(xs []string, x string) []string {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}
