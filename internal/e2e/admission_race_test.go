package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/trainyard/trainyard/internal/ledger"
	"github.com/trainyard/trainyard/workflows/cluster"
)

const raceFleet = `
name: race
defaults: {provider: lab, provisioner: {kind: local}, resources: {cpus: 1}}
nodes: [{name: race-1}, {name: race-2}, {name: race-3}, {name: race-4}, {name: race-5}]
`

// TestOneTrainingPerConfigUnderRace is issue 30's race, on the real binary:
// rounds of 5 trainings of one config submitted at the same moment, on a
// cluster where each of them alone fits any of 5 idle nodes. The cluster
// workflow's own ledger (queried from Temporal, not polled through the API)
// must never hold two of them at once. Before admission moved into the
// cluster workflow, each placement was admitted by an activity on a status
// query and committed by a later update, and two could pass together.
// TRAINYARD_RACE_ROUNDS sets the rounds (default 6; the must-show
// is 50).
func TestOneTrainingPerConfigUnderRace(t *testing.T) {
	t.Parallel()
	rounds := 6
	if s := os.Getenv("TRAINYARD_RACE_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("TRAINYARD_RACE_ROUNDS=%q", s)
		}
		rounds = n
	}
	dev := placementDev(t, "race", raceFleet)
	tc, err := client.Dial(client.Options{HostPort: dev.ep.Temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	ledgerNow := func() []ledger.Entry {
		v, err := tc.QueryWorkflow(context.Background(), cluster.WorkflowID("race"), "", cluster.QueryStatus)
		if err != nil {
			t.Fatalf("cluster status: %v", err)
		}
		var st cluster.Status
		if err := v.Get(&st); err != nil {
			t.Fatal(err)
		}
		return st.Ledger
	}
	seen := map[string]ledger.Entry{} // training records by work id, last seen
	start := time.Now()
	for r := range rounds {
		var wg sync.WaitGroup
		ids := make([]string, 5)
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids[i] = workJob(t, dev, oneRole("race", "training", "square8_2p", 0, []string{"sleep", "0.3"}))
			}()
		}
		wg.Wait()
		for _, id := range ids {
			waitJob(t, dev, id, fmt.Sprintf("completed (round %d)", r+1), func(j placedJob) bool { return j.Status == "completed" })
		}
		for _, e := range ledgerNow() {
			if e.Kind == "training" && e.Config == "square8_2p" {
				seen[e.WorkID] = e
			}
		}
	}
	var es []ledger.Entry
	for _, e := range seen {
		es = append(es, e)
	}
	if len(es) != 5*rounds {
		t.Fatalf("the ledger shows %d trainings of square8_2p, want %d", len(es), 5*rounds)
	}
	overlaps := 0
	for i := range es {
		for j := i + 1; j < len(es); j++ {
			a, b := es[i], es[j]
			if a.Start.Before(b.End) && b.Start.Before(a.End) {
				overlaps++
				t.Errorf("%s on %s [%s, %s] and %s on %s [%s, %s] ran at the same time", a.WorkID, a.Node, a.Start.Format(time.StampMilli), a.End.Format(time.StampMilli),
					b.WorkID, b.Node, b.Start.Format(time.StampMilli), b.End.Format(time.StampMilli))
			}
		}
	}
	t.Logf("%d rounds of 5 concurrent trainings of one config: %d overlaps in the cluster's ledger (%v)", rounds, overlaps, time.Since(start).Round(time.Second))
}
