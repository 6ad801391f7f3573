package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/selfplay/alerts"
	"github.com/trainyard/trainyard/internal/selfplay/populate"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/selfplay"
)

// TestSelfplayPopulator: the queue populator on the real binary starts a
// populator-driven square8_2p loop and queues its work by the target mix
// (50/25/25 here, so a tournament comes early: self-play, training,
// tournament); the loop runs each item as its own allocation; the queue
// status, daemons health, alerts (queue depth over a threshold of 1),
// configs catalogue, datasets and cluster utilisation read it all back
// through the API and the CLI; stopping the populator stops the loop.
func TestSelfplayPopulator(t *testing.T) {
	t.Parallel()
	dev, _ := selfplayDev(t)
	out := cli(t, dev, "selfplay", "populate", "start", "--cluster", "lab", "--config", "square8_2p:2", "--poll", "1s", "--depth", "3",
		"--mix-selfplay", "0.5", "--mix-training", "0.25", "--mix-tournament", "0.25", "--alert-queue-depth", "1",
		"--games", "24", "--min-games", "24", "--simulations", "16", "--eval-games", "10", "--train-epochs", "2", "--sync-interval", "1s")
	if !strings.Contains(out, "running") {
		t.Fatalf("populate start: %s", out)
	}
	waitFor(t, func() bool {
		code, _, _ := dev.call("GET", "/v1/selfplay/lab/square8_2p", dev.admin, nil, nil)
		return code == 200
	})
	// The loop runs the first three items: self-play, training, tournament.
	sp := waitLoop(t, dev, "lab/square8_2p", 6*time.Minute, func(sp api.Selfplay) bool {
		return sp.State.WorkDone[populate.Tournament] >= 1
	})
	if !sp.State.Queued || len(sp.State.Work) < 3 {
		t.Fatalf("loop: queued %v, work %+v", sp.State.Queued, sp.State.Work)
	}
	for i, want := range []string{populate.Selfplay, populate.Training, populate.Tournament} {
		w := sp.State.Work[i]
		t.Logf("work #%d %s on %s: %s (%s)", w.ID, w.Kind, w.Node, w.Result, w.Why)
		if w.Kind != want || w.Skipped || w.Node == "" {
			t.Fatalf("work item %d: %+v, want %s", i, w, want)
		}
	}
	if g := sp.State.Generations[0]; g.Model == "" || len(g.Gauntlet) == 0 || (g.State != "promoted" && g.State != "kept") {
		t.Fatalf("generation 1 after its tournament: %+v", g)
	}

	// The populator tops the queue up as items finish (every poll).
	var pop api.SelfplayPopulator
	queuedEvents := 0
	waitFor(t, func() bool {
		if code, _, raw := dev.call("GET", "/v1/selfplay-populators/lab", dev.admin, nil, &pop); code != 200 {
			t.Fatalf("get populator: %d %s", code, raw)
		}
		queuedEvents = 0
		for _, e := range pop.State.Events {
			if strings.HasPrefix(e.What, "queued #") {
				queuedEvents++
			}
		}
		return queuedEvents >= 4
	})
	t.Logf("populator: %d polls, last error %q", pop.State.Polls, pop.State.LastError)
	if pop.Status != "running" || len(pop.State.Plans) != 1 || pop.State.Plans[0].State != "populating" || !strings.Contains(pop.State.Plans[0].Why, "weight 2.00") {
		t.Fatalf("populator: %s %+v", pop.Status, pop.State.Plans)
	}

	var q selfplay.QueueStatus
	if code, _, raw := dev.call("GET", "/v1/queue/status", dev.admin, nil, &q); code != 200 {
		t.Fatalf("queue status: %d %s", code, raw)
	}
	if len(q.Clusters) != 1 || q.Clusters[0].Cluster != "lab" || q.Clusters[0].Populator != "running" || q.Clusters[0].Target.Tournament != 0.25 {
		t.Fatalf("queue status: %+v", q)
	}
	cq := q.Clusters[0].Configs[0]
	if !cq.Populated || cq.Done[populate.Selfplay] < 1 || cq.Done[populate.Training] < 1 || cq.Done[populate.Tournament] < 1 || q.Clusters[0].Depth < 1 {
		t.Fatalf("queue of square8_2p: %+v (depth %d)", cq, q.Clusters[0].Depth)
	}

	var health struct{ Daemons []api.Daemon }
	if code, _, raw := dev.call("GET", "/v1/daemons/health", dev.admin, nil, &health); code != 200 {
		t.Fatalf("daemons health: %d %s", code, raw)
	}
	kinds := map[string]api.Daemon{}
	for _, d := range health.Daemons {
		kinds[d.Kind] = d
	}
	if p := kinds["populator"]; !p.Running || p.LastActivity == nil || p.ID != "selfplay-populator/lab" {
		t.Fatalf("populator health: %+v", health.Daemons)
	}
	if s, ok := kinds["ephemeral-sync"]; !ok || s.ID != "selfplay/lab/square8_2p" {
		t.Fatalf("sync health: %+v", health.Daemons)
	}

	var al struct{ Alerts []api.ClusterAlert }
	waitFor(t, func() bool {
		dev.call("GET", "/v1/alerts", dev.admin, nil, &al)
		return len(al.Alerts) > 0
	})
	a := al.Alerts[0]
	if a.Cluster != "lab" || a.Rule != alerts.QueueDepth || a.State != "firing" || a.Value <= 1 || a.Since.IsZero() || a.Condition != "queue depth > 1" {
		t.Fatalf("alerts: %+v", al.Alerts)
	}

	var cfgs struct{ Configs []selfplay.ConfigEntry }
	if code, _, raw := dev.call("GET", "/v1/selfplay/configs", dev.admin, nil, &cfgs); code != 200 || len(cfgs.Configs) != 12 {
		t.Fatalf("configs: %d %s", code, raw)
	}
	for _, c := range cfgs.Configs {
		if c.Config == "square8_2p" && (c.Cells != 64 || c.MinGB != 8 || c.Weight != 2 || c.Games < 24) {
			t.Fatalf("square8_2p in the catalogue: %+v", c)
		}
		if c.Config == "hexagonal_4p" && (c.Cells != 469 || c.MinGB != 32) {
			t.Fatalf("hexagonal_4p in the catalogue: %+v", c)
		}
	}
	var ds struct{ Loops []selfplay.LoopData }
	if code, _, raw := dev.call("GET", "/v1/selfplay/datasets?config=square8_2p", dev.admin, nil, &ds); code != 200 || len(ds.Loops) != 1 {
		t.Fatalf("datasets: %d %s", code, raw)
	}
	if l := ds.Loops[0]; l.Datasets < 1 || l.DataBytes <= 0 || l.Batches < 1 || l.Games < 24 || l.Generations[0].Quality <= 0 || l.Generations[0].Positions <= 0 {
		t.Fatalf("datasets of square8_2p: %+v", l)
	}
	var u cluster.Utilization
	if code, _, raw := dev.call("GET", "/v1/clusters/lab/utilization", dev.admin, nil, &u); code != 200 || len(u.Nodes) != 2 || u.Nodes[0].CPUs <= 0 {
		t.Fatalf("utilization: %d %s", code, raw)
	}
	for _, args := range [][]string{{"queue"}, {"daemons"}, {"alerts"}, {"configs"}, {"datasets"}, {"utilization", "lab"}, {"populate", "show", "lab"}} {
		out := cli(t, dev, append([]string{"selfplay"}, args...)...)
		t.Logf("$ trainyard selfplay %s\n%s", strings.Join(args, " "), out)
		want := map[string]string{"queue": "square8_2p", "daemons": "selfplay-populator/lab", "alerts": "queue_depth", "configs": "hexagonal_4p",
			"datasets": "lab/square8_2p", "utilization": "node-a", "populate": "populating"}[args[0]]
		if !strings.Contains(out, want) {
			t.Fatalf("selfplay %s: no %q in\n%s", strings.Join(args, " "), want, out)
		}
	}

	cli(t, dev, "selfplay", "populate", "stop", "lab")
	waitFor(t, func() bool {
		dev.call("GET", "/v1/selfplay-populators/lab", dev.admin, nil, &pop)
		return pop.Status == "completed" && pop.State.Phase == "stopped"
	})
	deadline := time.Now().Add(3 * time.Minute)
	for sp = getLoop(t, dev, "lab/square8_2p"); sp.Status == "running"; sp = getLoop(t, dev, "lab/square8_2p") {
		if time.Now().After(deadline) {
			t.Fatalf("loop still running 3m after the populator stopped: %s", sp.State.Phase)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if sp.Status != "completed" || sp.State.Phase != "stopped" {
		t.Fatalf("loop after the populator stopped: %s %s", sp.Status, sp.State.Phase)
	}
	recordHistory(t, dev, "selfplay-populator/lab", "history-populator.json")
	recordHistory(t, dev, "selfplay/lab/square8_2p", "history-queued.json")
}
