package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/internal/provision/provisiontest"
	"github.com/trainyard/trainyard/workflows/selfplay"
)

// spotMetadata serves AWS's spot instance-action protocol (IMDSv2) per node
// under /<node>: 404 until the test gives that node a notice.
type spotMetadata struct {
	mu      sync.Mutex
	noticed map[string]bool
}

func (m *spotMetadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	node, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPut && rest == "latest/api/token":
		io.WriteString(w, "token")
	case rest == "latest/meta-data/spot/instance-action" && r.Header.Get("X-aws-ec2-metadata-token") == "token":
		m.mu.Lock()
		noticed := m.noticed[node]
		m.mu.Unlock()
		if !noticed {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"action":"terminate","time":%q}`, time.Now().Add(2*time.Minute).UTC().Format(time.RFC3339))
	default:
		http.Error(w, "", http.StatusUnauthorized)
	}
}

// TestDrainLosesNoIterations is issue 10's "use the preemption notice": a
// run on a node that is drained through the API, that gets a spot
// preemption notice, or whose agent gets SIGTERM, checkpoints the iteration
// it is on and moves; none is a lost segment, and each resumes from at
// least the iteration it was seen at just before; a kill -9 of the agent,
// measured after them, resumes from the last periodic checkpoint and
// redoes the iterations since (up to checkpoint_every).
func TestDrainLosesNoIterations(t *testing.T) {
	t.Parallel()
	wasm := plugintest.BuildGo(t, "./plugins/cartpole")
	meta := &spotMetadata{noticed: map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: meta}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	dir := t.TempDir()
	dev := startDev(t, dir)
	spec := fmt.Sprintf(`
name: lab
defaults:
  provider: local
  provisioner: {kind: local}
nodes:
  - {name: node-a, preemption_notice: "aws:http://%[1]s/node-a"}
  - {name: node-b, preemption_notice: "aws:http://%[1]s/node-b"}
  - {name: node-c, preemption_notice: "aws:http://%[1]s/node-c"}
`, ln.Addr())
	if out := cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", spec)); !strings.Contains(out, "TOTAL (3 nodes") {
		t.Fatalf("cluster up: %s", out)
	}
	t.Cleanup(func() { killAgentsOf(dir) })
	if code, raw := upload(t, dev, dev.admin, wasm, nil); code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, raw)
	}
	var ref struct {
		ID string `json:"id"`
	}
	const every = 50
	body := fmt.Sprintf(`{"cluster":"lab","env":"CartPole-v1","iterations":2000,"checkpoint_every":%d,"seed":3}`, every)
	if code, _, raw := dev.call("POST", "/v1/runs", dev.admin, body, &ref); code != http.StatusCreated {
		t.Fatalf("submit run: %d %s", code, raw)
	}
	id := ref.ID

	last := int64(0)
	move := func(how string, trigger func(node string)) string {
		r := waitRun(t, dev, id, 2*time.Minute, func(r runView) bool {
			return r.Progress.State == "running" && r.Live != nil && r.Live.Iteration >= last+3
		})
		node, seen, drains := r.Progress.Node, r.Live.Iteration, r.Progress.Drains
		trigger(node)
		r = waitRun(t, dev, id, 2*time.Minute, func(r runView) bool {
			return r.Progress.Drains > drains && len(r.Progress.Restores) > drains && r.Progress.State == "running"
		})
		rs := r.Progress.Restores[len(r.Progress.Restores)-1]
		if r.Progress.Failures != 0 || rs.Node == node || rs.Iteration < seen {
			var st struct {
				Events []string `json:"events"`
			}
			dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st)
			t.Fatalf("%s on %s at iteration %d: want a move with nothing redone, got restores %+v, failures %d, reason %q; cluster events %q",
				how, node, seen, r.Progress.Restores, r.Progress.Failures, r.Progress.Reason, st.Events[max(len(st.Events)-8, 0):])
		}
		t.Logf("%s: %s seen at iteration %d, resumed on %s from iteration %d (0 lost; a kill -9 would have resumed from iteration %d)",
			how, node, seen, rs.Node, rs.Iteration, seen/every*every)
		last = rs.Iteration
		return node
	}

	drained := move("drain request", func(node string) {
		cli(t, dev, "cluster", "nodes", "drain", "lab", node, "--deadline", "30s")
	})
	if out := cli(t, dev, "cluster", "status", "lab"); !strings.Contains(out, "draining: drain requested") {
		t.Fatalf("status of a drained node: %s", out)
	}
	cli(t, dev, "cluster", "nodes", "undrain", "lab", drained)

	noticed := move("spot preemption notice", func(node string) {
		meta.mu.Lock()
		meta.noticed[node] = true
		meta.mu.Unlock()
	})

	move("SIGTERM", func(node string) {
		var st clusterStatus
		dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st)
		for _, n := range st.Nodes {
			if n.Name == node {
				if err := syscall.Kill(n.AgentPID, syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		t.Fatalf("no agent pid for %s", node)
	})

	// For comparison, measured: kill -9 of the agent, no notice. Nothing
	// checkpoints; the run resumes from its last checkpoint (the SIGTERM's,
	// where this segment began), redoing every iteration since. The
	// preempted node is back for it to move to.
	meta.mu.Lock()
	meta.noticed[noticed] = false
	meta.mu.Unlock()
	cli(t, dev, "cluster", "nodes", "undrain", "lab", noticed)
	r := waitRun(t, dev, id, 2*time.Minute, func(r runView) bool {
		return r.Progress.State == "running" && r.Live != nil && r.Live.Iteration >= last+3
	})
	node, seen, restores := r.Progress.Node, r.Live.Iteration, len(r.Progress.Restores)
	var st clusterStatus
	dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st)
	for _, n := range st.Nodes {
		if n.Name == node {
			if err := syscall.Kill(n.AgentPID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	r = waitRun(t, dev, id, 2*time.Minute, func(r runView) bool {
		return len(r.Progress.Restores) > restores && r.Progress.State == "running"
	})
	rs := r.Progress.Restores[len(r.Progress.Restores)-1]
	t.Logf("kill -9: %s seen at iteration %d, resumed on %s from iteration %d: %d or more iterations redone, up to %d (the drains above: 0)",
		node, seen, rs.Node, rs.Iteration, max(seen-rs.Iteration, 0), every)
	// The kill came at or after the iteration seen (the last heartbeat,
	// so how far after is not known): the run resumes from the
	// last checkpoint before it, at most one interval back, with one lost
	// segment.
	if rs.Iteration < seen-every || r.Progress.Failures != 1 {
		t.Fatalf("kill -9 at iteration %d or later: resumed from %d with %d failures; want at most %d iterations back and one lost segment",
			seen, rs.Iteration, r.Progress.Failures, every)
	}

	if code, _, raw := dev.call("POST", "/v1/runs/"+id+"/cancel", dev.admin, nil, nil); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, raw)
	}
	r = waitRun(t, dev, id, time.Minute, func(r runView) bool { return r.Status != "running" })
	if r.Progress.Drains != 3 || r.Progress.Failures != 1 {
		t.Fatalf("after three drains and a kill -9: %+v", r.Progress)
	}
	// Bad input: an unknown node is a 404, a bad deadline a 422 naming it.
	code, hdr, raw := dev.call("POST", "/v1/clusters/lab/nodes/nope/drain", dev.admin, nil, nil)
	assertProblem(t, code, hdr, raw, http.StatusNotFound, "")
	code, hdr, raw = dev.call("POST", "/v1/clusters/lab/nodes/node-a/drain?deadline=soon", dev.admin, nil, nil)
	assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, "query.deadline")
}

// TestDrainedSelfplayLosesNoGames is issue 10's "use the preemption
// notice" for self-play: a node running a self-play batch that is drained
// through the API, or whose agent gets SIGTERM, stops its games in flight,
// syncs every game it finished (with a 30 s sync interval, long before the
// next periodic sync) and the loop moves the batch to the other node,
// which resumes from exactly the games in S3: 0 games lost each time,
// counted as the killed attempt's spool (games played) against the games
// in S3. For comparison a plain kill -9 of the agent, measured the same
// way, loses every game finished since its last sync (up to one interval).
func TestDrainedSelfplayLosesNoGames(t *testing.T) {
	t.Parallel()
	dev, dir := selfplayDev(t)
	s3 := s3Client(t, dev, "")
	const interval = 30 * time.Second
	body := fmt.Sprintf(`{"cluster":"lab","config":"square8_2p","settings":{"generations":1,"games_per_generation":100000,"simulations":48,"bootstrap":"rollouts",
		"sync_interval":%d,"seed":13,"quality":{"min_games":48}}}`, interval.Nanoseconds())
	if code, _, raw := dev.call("POST", "/v1/selfplay", dev.admin, body, nil); code != http.StatusCreated {
		t.Fatalf("start loop: %d %s", code, raw)
	}
	id := "lab/square8_2p"
	sp := waitLoop(t, dev, id, 2*time.Minute, func(sp api.Selfplay) bool {
		return sp.State.Phase == "selfplay" && sp.LoopID != "" && sp.Live != nil && sp.Live.Played >= 3
	})
	prefix := selfplay.GamesPrefix(sp.LoopID, 1)
	// lost counts an attempt's finished games (its spool) not in S3.
	lost := func(attempt int) (played, inS3, lost int) {
		spool, _ := readAttemptSpool(t, dir, sp.LoopID, 1, attempt)
		synced := map[int]bool{}
		for _, b := range readBatches(t, dev, s3, prefix, attempt) {
			for _, i := range b.indexes {
				if !spool[i] {
					t.Fatalf("attempt %d: game %d is in S3 but not in the spool", attempt, i)
				}
				synced[i] = true
			}
		}
		for i := range spool {
			if !synced[i] {
				lost++
			}
		}
		return len(spool), len(synced), lost
	}
	// move drains the node of attempt n by trigger and checks that attempt
	// n+1 runs elsewhere from exactly the games in S3, with 0 lost.
	total := 0
	move := func(how string, attempt int, trigger func(node string)) string {
		cur := waitLoop(t, dev, id, 2*time.Minute, func(sp api.Selfplay) bool {
			return sp.State.Phase == "selfplay" && sp.Live != nil && sp.Live.Played >= 3 && len(sp.State.Generations) == 1 && sp.State.Generations[0].Attempts == attempt
		})
		node, drains := cur.State.Node, cur.State.Drains
		before := countBatches(t, dev, s3, prefix, attempt)
		trigger(node)
		next := waitLoop(t, dev, id, 2*time.Minute, func(sp api.Selfplay) bool {
			return sp.State.Drains > drains && sp.State.Generations[0].Attempts == attempt+1 && sp.Live != nil && sp.State.Phase == "selfplay"
		})
		played, inS3, n := lost(attempt)
		total += inS3
		t.Logf("%s on %s: attempt %d played %d games (%d uploads before the notice), %d in S3, %d lost; attempt %d on %s resumed from %d (%s)",
			how, node, attempt, played, before, inS3, n, attempt+1, next.State.Node, next.Live.Resumed, next.State.Reason)
		if played == 0 || n != 0 {
			t.Fatalf("%s: %d of %d finished games lost", how, n, played)
		}
		if next.State.Node == node || next.Live.Resumed != total || next.State.Failures != 0 {
			t.Fatalf("%s: the retry runs on %s (was %s) resuming from %d games (S3 has %d), %d failures",
				how, next.State.Node, node, next.Live.Resumed, total, next.State.Failures)
		}
		return node
	}

	drained := move("drain request", 1, func(node string) {
		cli(t, dev, "cluster", "nodes", "drain", "lab", node, "--deadline", "30s")
	})
	cli(t, dev, "cluster", "nodes", "undrain", "lab", drained)

	move("SIGTERM", 2, func(node string) {
		if err := syscall.Kill(agentPID(t, dev, "lab", node), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	})

	// kill -9 of attempt 3's agent: no chance to sync. Killed once its
	// spool shows games finished since its last sync, it loses at least
	// those (as long as no sync ran between that look and the kill).
	unsynced := func() (n, synced int) {
		played, s := readAttemptSpool(t, dir, sp.LoopID, 1, 3)
		if s == 0 {
			s = total // no upload yet: S3 holds what attempt 3 resumed from
		}
		return len(played) - (s - total), s
	}
	node := getLoop(t, dev, id).State.Node
	pid := agentPID(t, dev, "lab", node)
	var pre, preSynced int
	waitFor(t, func() bool { pre, preSynced = unsynced(); return pre >= 2 })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for !provisiontest.ProcessGone(pid) {
		time.Sleep(10 * time.Millisecond)
	}
	played, inS3, n := lost(3)
	_, postSynced := unsynced()
	t.Logf("kill -9 on %s during attempt 3: %d games played, %d in S3, %d lost (%d unsynced just before the kill; the drains: 0 and 0)",
		node, played, inS3, n, pre)
	if postSynced == preSynced && n < pre {
		t.Fatalf("kill -9 with %d games unsynced lost only %d", pre, n)
	}
}
