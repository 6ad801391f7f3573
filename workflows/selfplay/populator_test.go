package selfplay

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/selfplay/alerts"
	"github.com/trainyard/trainyard/internal/selfplay/populate"
)

// TestPopulatorWorkflow drives the populator with scripted looks: it
// starts a loop per config, queues each config's first work in the mix's
// order, stops the loop of a config once it meets its Elo target and
// queues nothing more for it, raises the queue-depth alert, and stops the
// other loop when stopped itself.
func TestPopulatorWorkflow(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	// Under -race on a loaded CI machine the first workflow task (data
	// converter and mock set-up) can take longer than the 1 s default.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: 30 * time.Second})
	env.RegisterWorkflowWithOptions(Populator, workflow.RegisterOptions{Name: PopulatorName})
	a := &Activities{}
	env.RegisterActivity(a)

	var mu sync.Mutex
	looks := 0
	started := map[string]string{}
	queued := map[string][]WorkItem{}
	stopped := map[string]bool{}
	env.OnActivity(a.SelfplayStartLoop, mock.Anything, mock.Anything).Return(func(_ context.Context, in Input) error {
		mu.Lock()
		defer mu.Unlock()
		if !in.Queued {
			t.Errorf("loop %s started without Queued", in.Config)
		}
		started[in.Config] = in.LoopID
		return nil
	})
	env.OnActivity(a.SelfplayPopulatorLook, mock.Anything, mock.Anything).Return(func(_ context.Context, in PopulatorLook) (PopulatorView, error) {
		mu.Lock()
		defer mu.Unlock()
		looks++
		v := PopulatorView{GPUs: []GPUUse{{Node: "n", Index: 0, Util: 90}}}
		for _, c := range in.Configs {
			lv := LoopView{Config: c, Queue: []string{}}
			if id, ok := started[c]; ok {
				lv.Exists, lv.Running, lv.Queued, lv.LoopID, lv.Status = true, !stopped[c], true, id, "running"
				for _, w := range queued[c] {
					lv.Queue = append(lv.Queue, w.Kind)
				}
			}
			// From the second look on, square8_2p's best is rated 1300.
			if c == "square8_2p" && looks >= 2 {
				lv.Best, lv.BestElo, lv.Velocity = "gen1-x", 1300, 0.5
			}
			v.Loops = append(v.Loops, lv)
		}
		return v, nil
	})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", mock.Anything, mock.Anything).Return(
		func(_, id, _, signal string, arg any) error {
			mu.Lock()
			defer mu.Unlock()
			cfg := id[len("selfplay/lab/"):]
			switch signal {
			case SignalWork:
				queued[cfg] = append(queued[cfg], arg.([]WorkItem)...)
			case SignalStop:
				stopped[cfg] = true
			}
			return nil
		})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalStop, nil) }, 95*time.Second)
	env.ExecuteWorkflow(PopulatorName, PopulatorInput{
		Cluster: "lab",
		Configs: []ScheduledConfig{{Config: "square8_2p", GamePlugin: "g1", TargetElo: 1200}, {Config: "hex8_2p", GamePlugin: "g2"}},
		Tuning:  populate.PopulatorTuning{Depth: 3},
		Alerts:  alerts.Thresholds{QueueDepthAbove: 4},
	})
	if !env.IsWorkflowCompleted() {
		t.Fatal("populator did not end")
	}
	var st PopulatorState
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if len(started) != 2 || started["hex8_2p"] == "" {
		t.Fatalf("started %v", started)
	}
	kinds := func(c string) []string {
		var k []string
		for _, w := range queued[c] {
			k = append(k, w.Kind)
		}
		return k
	}
	// Self-play first, then the training its export allows, then self-play.
	want := []string{populate.Selfplay, populate.Training, populate.Selfplay}
	for _, c := range []string{"square8_2p", "hex8_2p"} {
		if got := kinds(c); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Fatalf("%s queued %v, want %v", c, got, want)
		}
	}
	if !stopped["square8_2p"] || !stopped["hex8_2p"] {
		t.Fatalf("stopped %v", stopped)
	}
	if st.Phase != "stopped" || st.Polls < 3 {
		t.Fatalf("phase %s after %d polls", st.Phase, st.Polls)
	}
	var met, populating bool
	for _, p := range st.Plans {
		met = met || (p.Config == "square8_2p" && p.State == "met")
		populating = populating || (p.Config == "hex8_2p" && p.State == "populating" && p.Queued.Total() == 3)
	}
	if !met || !populating {
		t.Fatalf("plans %+v", st.Plans)
	}
	var depth, velocity bool
	for _, al := range st.Alerts {
		depth = depth || (al.Rule == alerts.QueueDepth && al.Subject == "lab" && al.State == "firing")
		velocity = velocity || (al.Rule == alerts.EloVelocity && al.Subject == "square8_2p" && al.State == "pending")
	}
	if !depth || !velocity {
		t.Fatalf("alerts %+v", st.Alerts)
	}
}
