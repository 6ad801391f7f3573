//go:build unix

package e2e

import (
	"fmt"
	"html"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/chromiumtest"
	"github.com/trainyard/trainyard/workflows/cluster"
)

// TestDashboard is the dashboard's must-show on the real binary: with a
// finished CartPole run, a finished sweep, a two-generation self-play loop
// and a job waiting for the cluster's one GPU, headless Chromium (offline
// but for loopback) loads every page of /ui with the admin token in the
// URL's fragment and finds what the API says: the nodes and their GPU, the
// waiting job with its reason, the run with a chart drawn from its stored
// scalars (as many points as GET /v1/runs/{id}/scalars has), the sweep's
// trials on one chart, the loop's Elo by generation and every leaderboard
// row, links into the Temporal UI; without a token, only the sign-in form.
// Screenshots of each page go to .cache/dashboard/.
func TestDashboard(t *testing.T) {
	t.Parallel()
	chromium := chromiumtest.Find(t)
	start := time.Now()
	dev, _ := selfplayDev(t)
	gpuNode := writeFile(t, "gpu.yaml", `{name: gpu-box, provider: local, provisioner: {kind: local}, ephemeral: false, resources: {gpus: "0:GTX 1080 Ti:11GB"}}`)
	cli(t, dev, "cluster", "nodes", "add", "lab", "-f", gpuNode)
	waitFor(t, func() bool {
		var st clusterStatus
		dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st)
		return st.health("gpu-box") == "Idle" || st.health("gpu-box") == "Healthy"
	})

	// The work: a loop, a run, a sweep, and a job that holds the GPU so
	// that a second GPU job waits.
	if code, _, raw := dev.call("POST", "/v1/selfplay", dev.admin, `{"cluster":"lab","config":"square8_2p","settings":{"generations":2,
		"games_per_generation":24,"simulations":16,"eval_games":10,"sync_interval":1000000000,"seed":7,"quality":{"min_games":24}}}`, nil); code != http.StatusCreated {
		t.Fatalf("start loop: %d %s", code, raw)
	}
	run := strings.TrimSpace(cli(t, dev, "run", "train", "--cluster", "lab", "--env", "CartPole-v1", "--iterations", "6", "--seed", "3", "--detach"))
	maRun := strings.TrimSpace(cli(t, dev, "run", "train", "--cluster", "lab", "--env", "PrisonersDilemma-v0", "--iterations", "3", "--seed", "1",
		"--policy", "agent_0", "--policy", "agent_1", "--policy-map", "agent_0=agent_0", "--policy-map", "agent_1=agent_1", "--detach"))
	sweep := strings.TrimSpace(cli(t, dev, "sweep", "run", "--cluster", "lab", "--env", "CartPole-v1", "--iterations", "4", "--checkpoint-every", "2",
		"--envs-per-worker", "4", "--episode-length", "128", "--grid", "learning_rate=0.003,0.0003", "--max-concurrent", "2", "--detach"))
	holder := submitJob(t, dev, []string{"sleep", "600"}, 1)
	waitFor(t, func() bool { return getJob(t, dev, holder).Progress.State == "running" })
	waiting := submitJob(t, dev, []string{"true"}, 1)
	waitFor(t, func() bool {
		j := getJob(t, dev, waiting)
		return j.Progress.State == "waiting" && strings.Contains(j.Progress.Reason, "gpu")
	})

	waitRun(t, dev, run, 3*time.Minute, func(r runView) bool { return r.Status != "running" })
	waitRun(t, dev, maRun, 3*time.Minute, func(r runView) bool { return r.Status != "running" })
	sw := waitSweep(t, dev, sweep, 4*time.Minute, func(s sweepView) bool { return s.Status != "running" })
	loop := waitLoop(t, dev, "lab/square8_2p", 6*time.Minute, func(sp api.Selfplay) bool { return sp.Status != "running" })
	if loop.Status != "completed" || sw.Status != "completed" {
		t.Fatalf("loop %s (%s), sweep %s (%s): want both completed", loop.Status, loop.Error, sw.Status, sw.Error)
	}
	t.Logf("run, sweep and loop done in %v", time.Since(start).Round(time.Second))
	shots, err := filepath.Abs("../../.cache/dashboard")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	// page loads path signed in (the token in the fragment, which the page
	// moves to sessionStorage), checks that it rendered and saves a
	// screenshot; it returns the DOM.
	pageStart := time.Now()
	page := func(path, shot string) string {
		t.Helper()
		url := dev.ep.API + path + "#token=" + dev.admin
		dom, stderr := chromiumtest.Screenshot(t, chromium, url, filepath.Join(shots, shot+".png"), 1280, 900)
		if !strings.Contains(dom, `<body data-state="ready">`) {
			t.Fatalf("%s did not render: %s\nchromium: %s", path, chromiumtest.Tail(dom, 3000), chromiumtest.Tail(stderr, 1500))
		}
		if strings.Contains(dom, dev.admin) {
			t.Errorf("%s: the token is in the DOM", path)
		}
		return dom
	}
	must := func(path, dom string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(dom, w) {
				t.Errorf("%s lacks %s\nDOM: %s", path, w, chromiumtest.Tail(dom, 4000))
			}
		}
	}
	temporal := func(workflowID string) string {
		return `href="` + dev.ep.TemporalUI + "/namespaces/default/workflows/" + strings.ReplaceAll(workflowID, "/", "%2F") + `"`
	}

	// No token: the sign-in form and nothing of the API's.
	if dom, _ := chromiumtest.DumpDOM(t, chromium, dev.ep.API+"/ui/runs"); !strings.Contains(dom, `data-state="signin"`) ||
		!strings.Contains(dom, `type="password"`) || strings.Contains(dom, run) {
		t.Errorf("/ui/runs without a token: %s", chromiumtest.Tail(dom, 2000))
	}
	if dom, _ := chromiumtest.DumpDOM(t, chromium, dev.ep.API+"/ui/runs#token=ty_not-a-token"); !strings.Contains(dom, `data-state="signin"`) ||
		!strings.Contains(dom, "refused (401)") {
		t.Errorf("/ui/runs with a bad token: %s", chromiumtest.Tail(dom, 2000))
	}

	// Clusters: the nodes, the GPU, the waiting count, usage.
	dom := page("/ui/clusters", "clusters")
	must("/ui/clusters", dom, `data-cluster="lab"`, `data-node="node-a"`, `data-node="node-b"`, `data-node="gpu-box"`,
		"0: GTX 1080 Ti", "1 waiting", "Usage against quotas", temporal("cluster/lab"))

	// The queue: the waiting job, why, and what it waits behind.
	var q struct {
		Waiting []cluster.QueueEntry `json:"waiting"`
	}
	// The reason is the cluster's live state: a lease that ends between
	// the call and the page changes it, so the page is taken again then.
	for try := 0; ; try++ {
		if code, _, raw := dev.call("GET", "/v1/clusters/lab/queue", dev.admin, nil, &q); code != http.StatusOK || len(q.Waiting) != 1 || q.Waiting[0].ID != waiting {
			t.Fatalf("queue: %d %s", code, raw)
		}
		if dom = page("/ui/queue", "queue"); try == 4 || strings.Contains(dom, html.EscapeString(q.Waiting[0].Reason)) {
			break
		}
		time.Sleep(time.Second)
	}
	must("/ui/queue", dom, `data-id="`+waiting+`"`, html.EscapeString(q.Waiting[0].Reason), holder, temporal(waiting))

	// Runs, and the run with its curves from the stored scalars.
	must("/ui/runs", page("/ui/runs", "runs"), `data-id="`+run+`"`)
	var sc api.Scalars
	if code, _, raw := dev.call("GET", "/v1/runs/"+run+"/scalars", dev.admin, nil, &sc); code != http.StatusOK || len(sc.Tags["recent_return_mean"]) != 6 {
		t.Fatalf("scalars of %s: %d %s", run, code, raw)
	}
	dom = page("/ui/runs/"+run, "run")
	must("/ui/runs/"+run, dom, `data-run="`+run+`"`, `data-source="scalars"`, temporal(run),
		fmt.Sprintf(`data-points="recent_return_mean:%d,episode_return_mean:%d"`, len(sc.Tags["recent_return_mean"]), len(sc.Tags["episode_return_mean"])),
		fmt.Sprintf(`data-points="policy_loss:%d,value_loss:%d,entropy:%d"`, len(sc.Tags["policy_loss"]), len(sc.Tags["value_loss"]), len(sc.Tags["entropy"])))
	if n := strings.Count(dom, "<canvas"); n != 2 {
		t.Errorf("run page: %d canvases, want 2 charts", n)
	}
	last := sc.Tags["recent_return_mean"][5].Value
	if want := "<td>" + jsNum(last) + "</td>"; !strings.Contains(dom, want) {
		t.Errorf("run page: the chart's numbers lack the last recent_return_mean %s", want)
	}

	// A multi-agent run: each policy's return on a chart of its own, each
	// trained policy's losses.
	dom = page("/ui/runs/"+maRun, "run-multiagent")
	must("/ui/runs/"+maRun, dom, `data-chart="Return by policy"`, `data-points="agent_0:3,agent_1:3"`,
		`data-points="agent_0 policy_loss:3,agent_1 policy_loss:3,agent_0 value_loss:3,agent_1 value_loss:3"`)

	// The sweep: every trial's curve on one chart.
	must("/ui/sweeps", page("/ui/sweeps", "sweeps"), `data-id="`+sweep+`"`)
	dom = page("/ui/sweeps/"+sweep, "sweep")
	var series []string
	for _, tr := range sw.Progress.Trials {
		must("/ui/sweeps/"+sweep, dom, `data-id="`+tr.RunID+`"`)
		series = append(series, fmt.Sprintf("#%d learning_rate=%v:4", tr.Index, tr.Params["learning_rate"]))
	}
	must("/ui/sweeps/"+sweep, dom, `data-points="`+strings.Join(series, ",")+`"`, temporal(sweep))

	// Self-play: Elo against generations, and the leaderboard's rows.
	must("/ui/selfplay", page("/ui/selfplay", "selfplay"), `data-id="lab/square8_2p"`)
	var lb struct {
		Leaderboards []struct {
			Entries []struct {
				Model string  `json:"model"`
				Elo   float64 `json:"elo"`
			} `json:"entries"`
		} `json:"leaderboards"`
	}
	if code, _, raw := dev.call("GET", "/v1/selfplay/leaderboard?config=square8_2p", dev.admin, nil, &lb); code != http.StatusOK || len(lb.Leaderboards) != 1 {
		t.Fatalf("leaderboard: %d %s", code, raw)
	}
	dom = page("/ui/selfplay/lab/square8_2p", "selfplay-loop")
	rated := 0
	for _, g := range loop.State.Generations {
		if g.Elo != 0 {
			rated++
		}
	}
	must("/ui/selfplay/lab/square8_2p", dom, fmt.Sprintf(`data-points="Elo:%d"`, rated), temporal("selfplay/lab/square8_2p"))
	rows := regexp.MustCompile(`data-model="([^"]+)" data-elo="(-?\d+)"`).FindAllStringSubmatch(dom, -1)
	if len(rows) != len(lb.Leaderboards[0].Entries) {
		t.Errorf("leaderboard: %d rows on the page, %d in the API", len(rows), len(lb.Leaderboards[0].Entries))
	}
	for i, e := range lb.Leaderboards[0].Entries {
		if i < len(rows) && (rows[i][1] != e.Model || rows[i][2] != fmt.Sprint(math.Round(e.Elo))) {
			t.Errorf("leaderboard row %d: %s %s, want %s %.0f", i+1, rows[i][1], rows[i][2], e.Model, e.Elo)
		}
	}

	page("/ui/alerts", "alerts")
	t.Logf("9 pages rendered and shot in %v (%s)", time.Since(pageStart).Round(time.Second), shots)

	// The Temporal UI answers the links (it resolves the latest run itself).
	resp, err := http.Get(dev.ep.TemporalUI + "/namespaces/default/workflows/" + run)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("Temporal UI link: %v %v", err, resp)
	}
	if resp != nil {
		resp.Body.Close()
	}
}

// jsNum formats v as the dashboard's number tables do (4 decimals, whole
// numbers as integers).
func jsNum(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprint(int64(v))
	}
	return fmt.Sprintf("%.4f", v)
}
