package ledger

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/policy/params"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// TestSumAndQuota: the window clips entries, running ones count to now,
// tiers come from the node's VRAM, trainings are counted per work (a gang
// of instances is one), and Quota agrees with Sum on what admission reads.
func TestSumAndQuota(t *testing.T) {
	p := params.Default() // 24 h window; Tier 1 from 80 GB
	h100, a40 := 81920, 49152
	tests := []struct {
		name        string
		entries     []Entry
		tier1       map[string]float64
		byTier      map[string]float64
		byProvider  map[string]float64
		trainings   map[string]int
		runningWork int
	}{
		{name: "empty", tier1: map[string]float64{}, byTier: map[string]float64{}, byProvider: map[string]float64{}, trainings: map[string]int{}},
		{
			name: "ended inside the window",
			entries: []Entry{{WorkID: "a", Config: "hex8_2p", Kind: "selfplay", Node: "n1", Provider: "runpod", NodeVRAMMB: h100, GPUs: 2,
				Start: t0.Add(-2 * time.Hour), End: t0.Add(-time.Hour)}},
			tier1: map[string]float64{"hex8_2p": 7200}, byTier: map[string]float64{"1": 7200}, byProvider: map[string]float64{"runpod": 7200},
			trainings: map[string]int{},
		},
		{
			name: "clipped at the window's start",
			entries: []Entry{{WorkID: "a", Config: "hex8_2p", Kind: "selfplay", Node: "n1", Provider: "vast", NodeVRAMMB: a40, GPUs: 1,
				Start: t0.Add(-25 * time.Hour), End: t0.Add(-23 * time.Hour)}},
			tier1: map[string]float64{}, byTier: map[string]float64{"2": 3600}, byProvider: map[string]float64{"vast": 3600},
			trainings: map[string]int{},
		},
		{
			name: "a running training gang counts once",
			entries: []Entry{
				{WorkID: "g", Config: "sq", Kind: "training", Role: "trainer", Node: "n1", NodeVRAMMB: h100, GPUs: 1, Start: t0.Add(-time.Minute)},
				{WorkID: "g", Config: "sq", Kind: "training", Role: "rollout_worker", Node: "n2", Start: t0.Add(-time.Minute)},
				{WorkID: "t", Config: "sq", Kind: "sweep-trial", Node: "n1", NodeVRAMMB: h100, GPUs: 0.5, Start: t0.Add(-time.Minute)},
			},
			tier1: map[string]float64{"sq": 90}, byTier: map[string]float64{"1": 90}, byProvider: map[string]float64{"": 90},
			trainings: map[string]int{"sq": 1}, runningWork: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Book{Records: tt.entries}
			s, q := b.Sum(p, t0), b.Quota(p, t0)
			for _, c := range []struct {
				name      string
				got, want any
			}{
				{"sum tier1", s.Tier1GPUSecondsByConfig, tt.tier1}, {"quota tier1", q.Tier1GPUSecondsByConfig, tt.tier1},
				{"by tier", s.GPUSecondsByTier, tt.byTier}, {"by provider", s.GPUSecondsByProvider, tt.byProvider},
				{"sum trainings", s.RunningTrainingByConfig, tt.trainings}, {"quota trainings", q.RunningTrainingByConfig, tt.trainings},
				{"running works", len(s.Running), tt.runningWork},
			} {
				if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
					t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
				}
			}
		})
	}
}

// TestCloseAndPrune: a release closes a work's entries, a dead node its
// node's; pruning keeps running entries and those ended inside keep, and
// bounds the book by dropping the oldest ended ones.
func TestCloseAndPrune(t *testing.T) {
	var b Book
	b.Open(Entry{WorkID: "a", Node: "n1", Start: t0}, Entry{WorkID: "a", Node: "n2", Start: t0}, Entry{WorkID: "b", Node: "n2", Start: t0}, Entry{WorkID: "c", Node: "n3", Start: t0})
	b.Close("a", "", t0.Add(time.Hour))
	b.Close("", "n2", t0.Add(2*time.Hour))
	want := map[string]time.Time{"a/n1": t0.Add(time.Hour), "a/n2": t0.Add(time.Hour), "b/n2": t0.Add(2 * time.Hour), "c/n3": {}}
	for _, r := range b.Records {
		if got := want[r.WorkID+"/"+r.Node]; !r.End.Equal(got) {
			t.Errorf("%s on %s ended %v, want %v", r.WorkID, r.Node, r.End, got)
		}
	}
	b.Prune(t0.Add(25*time.Hour+30*time.Minute), 24*time.Hour) // a ended 24.5 h before: gone; b 23.5 h: kept
	if len(b.Records) != 2 || b.Records[0].WorkID != "b" || b.Records[1].WorkID != "c" {
		t.Fatalf("after prune: %+v", b.Records)
	}
	var big Book
	for i := range MaxRecords + 10 {
		big.Open(Entry{WorkID: fmt.Sprint(i), Start: t0, End: t0.Add(time.Duration(i+1) * time.Second)})
	}
	big.Open(Entry{WorkID: "running", Start: t0})
	big.Prune(t0.Add(time.Hour), 24*time.Hour)
	if len(big.Records) != MaxRecords || big.Records[0].WorkID != "11" || !big.Records[len(big.Records)-1].Running() {
		t.Fatalf("bounded book: %d entries, first %s", len(big.Records), big.Records[0].WorkID)
	}
}

// TestFoldedRecordsStayInTheWindow: a book that folds keeps the GPU time
// of the records it prunes beyond MaxRecords in hourly buckets, so the
// window's sums (quotas, usage) still count them; one that drops them, as
// books did before, forgets them. Buckets go once their hour leaves keep,
// and the hour the window begins in counts by its share.
func TestFoldedRecordsStayInTheWindow(t *testing.T) {
	p := params.Default() // 24 h window; Tier 1 from 80 GB
	const n = MaxRecords + 500
	book := func(folds bool) Book {
		b := Book{Folds: folds}
		for i := range n { // one GPU-minute each, over the last ~3.5 hours
			start := t0.Add(-time.Duration(n-i) * 5 * time.Second)
			b.Open(Entry{WorkID: fmt.Sprint(i), Config: "c", Kind: "selfplay", Node: "n", Provider: "runpod", NodeVRAMMB: 81920, GPUs: 1, Start: start})
			b.Close(fmt.Sprint(i), "", start.Add(time.Minute))
			b.Prune(start.Add(time.Minute), 24*time.Hour)
		}
		return b
	}
	want := float64(n * 60)
	for _, tc := range []struct {
		folds bool
		want  float64
	}{{true, want}, {false, MaxRecords * 60}} {
		b := book(tc.folds)
		if len(b.Records) != MaxRecords {
			t.Fatalf("folds=%v: %d records, want %d", tc.folds, len(b.Records), MaxRecords)
		}
		s, q := b.Sum(p, t0), b.Quota(p, t0)
		if got := s.Tier1GPUSecondsByConfig["c"]; got < tc.want-0.5 || got > tc.want+0.5 {
			t.Errorf("folds=%v: sum %v GPU-s, want %v", tc.folds, got, tc.want)
		}
		if got := q.Tier1GPUSecondsByConfig["c"]; got < tc.want-0.5 || got > tc.want+0.5 {
			t.Errorf("folds=%v: quota %v GPU-s, want %v", tc.folds, got, tc.want)
		}
		if got := s.GPUSecondsByProvider["runpod"] + s.GPUSecondsByKind["selfplay"]; got < 2*tc.want-1 || got > 2*tc.want+1 {
			t.Errorf("folds=%v: by provider and kind %v, want %v", tc.folds, got, 2*tc.want)
		}
	}
	b := book(true)
	if len(b.Folded) == 0 || len(b.Folded) > 5 {
		t.Fatalf("%d buckets, want one per hour the folded records fell in", len(b.Folded))
	}
	// A day later the window begins inside the oldest bucket's hour: that
	// bucket counts by its share; a day and an hour later it is gone.
	first := b.Folded[0]
	at := first.Hour.Add(24*time.Hour + 30*time.Minute)
	if got := first.inWindow(at.Add(-24 * time.Hour)); got < first.GPUSeconds/2-0.5 || got > first.GPUSeconds/2+0.5 {
		t.Errorf("bucket half in the window counts %v of %v", got, first.GPUSeconds)
	}
	b.Prune(first.Hour.Add(25*time.Hour), 24*time.Hour)
	if slices.ContainsFunc(b.Folded, func(k Bucket) bool { return k.Hour.Equal(first.Hour) }) {
		t.Errorf("a bucket whose hour left keep is still there")
	}
}
