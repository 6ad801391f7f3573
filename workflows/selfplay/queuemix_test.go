package selfplay

import (
	"testing"

	"github.com/trainyard/trainyard/internal/selfplay/populate"
)

// TestQueueMix: a populated loop counts its queue, its running item and its
// work done; a plain loop its generations and the phase it is in; a loop
// that ended counts nothing; each cluster's target is its populator's.
func TestQueueMix(t *testing.T) {
	mine := populate.Mix{Selfplay: 0.5, Training: 0.25, Tournament: 0.25}
	loops := []OpsLoop{
		{ID: "a/square8_2p", Cluster: "a", Config: "square8_2p", Running: true, State: State{
			Queued:   true,
			Queue:    []WorkItem{{Kind: populate.Selfplay}, {Kind: populate.Selfplay}, {Kind: populate.Training}},
			Current:  &WorkRecord{WorkItem: WorkItem{Kind: populate.Tournament}},
			WorkDone: map[string]int{populate.Selfplay: 3, populate.Training: 1},
		}},
		{ID: "b/hex8_2p", Cluster: "b", Config: "hex8_2p", Running: true, State: State{
			Phase:       "train",
			Generations: []Generation{{N: 1, Model: "m1", Gauntlet: []GauntletScore{{}}}, {N: 2}},
		}},
		{ID: "b/square8_2p", Cluster: "b", Config: "square8_2p", Running: false, State: State{Phase: "finished", Generations: []Generation{{N: 1}}}},
	}
	q := QueueMix(loops, func(cluster string) (string, populate.Mix, bool) {
		if cluster == "a" {
			return "running", mine, true
		}
		return "", populate.Mix{}, false
	})
	if len(q.Clusters) != 2 || q.Clusters[0].Cluster != "a" || q.Clusters[1].Cluster != "b" {
		t.Fatalf("clusters: %+v", q.Clusters)
	}
	a, b := q.Clusters[0], q.Clusters[1]
	if a.Populator != "running" || a.Target != mine || a.Queued[populate.Selfplay] != 2 || a.Queued[populate.Training] != 1 ||
		a.Running[populate.Tournament] != 1 || a.Done[populate.Selfplay] != 3 || a.Depth != 4 {
		t.Errorf("populated cluster: %+v", a)
	}
	if len(b.Configs) != 1 || b.Target != populate.DefaultMix || b.Running[populate.Training] != 1 ||
		b.Done[populate.Selfplay] != 2 || b.Done[populate.Training] != 1 || b.Done[populate.Tournament] != 1 || b.Depth != 1 {
		t.Errorf("plain cluster (its ended loop not counted): %+v", b)
	}
	if q.Queued[populate.Selfplay] != 2 || q.Running.Total() != 2 {
		t.Errorf("totals: queued %v running %v", q.Queued, q.Running)
	}
	if s := q.Actual.Selfplay + q.Actual.Training + q.Actual.Tournament; s < 0.999 || s > 1.001 {
		t.Errorf("actual mix %+v sums to %v", q.Actual, s)
	}
}
