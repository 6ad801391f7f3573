package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/inference/inferencetest"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/plugins/arithmetic/model"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/selfplay"
)

// operatorToken creates a token of role operator on dev.
func operatorToken(t *testing.T, dev *devProc, name string) string {
	t.Helper()
	var out struct {
		Token string `json:"token"`
	}
	if code, _, raw := dev.call("POST", "/v1/tokens", dev.admin, map[string]string{"name": name, "role": "operator"}, &out); code != http.StatusCreated {
		t.Fatalf("create operator token: %d %s", code, raw)
	}
	return out.Token
}

// sharedCluster brings cluster name up from spec on the shared dev and
// down when the test ends.
func sharedCluster(t *testing.T, dev *devProc, name, spec string) {
	t.Helper()
	cli(t, dev, "cluster", "up", "-f", writeFile(t, name+".yaml", spec))
	t.Cleanup(func() { cli(t, dev, "cluster", "down", name) })
}

// TestOperatorCannotAimAgentSecrets is the remote-trainer exfiltration of
// docs/security.md: an operator submits LLM loops whose remote trainer is
// a URL of their own with credentials_ref naming the admin token file, the
// S3 keys or the join secret; one names an inference endpoint as its
// trainer, one grants itself the cluster's trainer as a plugin endpoint.
// Every one is a 422 naming the field, and the operator's server never
// hears from an agent. The cluster's own trainer (declared by the admin,
// URL and credentials together) is what a loop may name, and it gets the
// batches with the admin's key.
func TestOperatorCannotAimAgentSecrets(t *testing.T) {
	t.Parallel()
	dev := sharedDev(t)
	var mu sync.Mutex
	var stolen []string
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		stolen = append(stolen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Write([]byte(`{"loss": 0}`))
	}))
	defer evil.Close()

	key := filepath.Join(t.TempDir(), "tuner.key")
	if err := os.WriteFile(key, []byte("sk-admins-tuner\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var steps []int64
	tuner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk-admins-tuner" {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		var b struct {
			Step int64 `json:"step"`
		}
		json.NewDecoder(r.Body).Decode(&b)
		mu.Lock()
		steps = append(steps, b.Step)
		mu.Unlock()
		fmt.Fprintf(w, `{"loss": 0.5, "checkpoint": {"model": "ft-%d"}}`, b.Step)
	}))
	defer tuner.Close()
	srv := inferencetest.Start(t, "arith-1b")
	llm := model.New(1)
	srv.Answer = func(msgs []inference.ChatMessage) string { return llm.Answer(msgs[len(msgs)-1].Content) }
	srv.OnReload = func(inferencetest.Reload) error { return nil }
	sharedCluster(t, dev, "sec-remote", fmt.Sprintf(`
name: sec-remote
defaults: {provider: local, provisioner: {kind: local}}
nodes: [{name: rem-a}]
endpoints:
  - {name: llm, url: %q, model: arith-1b, type: webhook, reload_url: %q}
  - {name: tuner, url: %q, type: trainer, credentials_ref: "file:%s"}
`, srv.URL, srv.URL+"/admin/reload", tuner.URL, key))
	op := operatorToken(t, dev, "sec-remote-operator")

	loop := func(grants []string, remote string) string {
		g, _ := json.Marshal(grants)
		return fmt.Sprintf(`{"kind": "llm", "cluster": "sec-remote", "env": "arithmetic", "capabilities": {"http": %s},
			"cpus": 0.25, "rollout_cpus": 0.25, "llm": {"steps": 3, "batch": 4, "pool_capacity": 8, "max_concurrency": 8, "remote": %s}}`,
			g, remote)
	}
	for _, tc := range []struct{ name, body, field string }{
		{"the admin token", loop([]string{"llm"}, fmt.Sprintf(`{"url": %q, "credentials_ref": "file:%s"}`, evil.URL, dev.ep.AdminTokenFile)), "body.llm.remote"},
		{"the S3 keys", loop([]string{"llm"}, fmt.Sprintf(`{"url": %q, "credentials_ref": "env:AWS_SECRET_ACCESS_KEY"}`, evil.URL)), "body.llm.remote"},
		{"the join secret", loop([]string{"llm"}, fmt.Sprintf(`{"endpoint": "tuner", "url": %q, "credentials_ref": "env:TRAINYARD_JOIN_SECRET"}`, evil.URL)), "body.llm.remote"},
		{"a URL for a name", loop([]string{"llm"}, fmt.Sprintf(`{"endpoint": %q}`, evil.URL)), "body.llm.remote.endpoint"},
		{"an inference endpoint as trainer", loop([]string{"llm"}, `{"endpoint": "llm"}`), "body.llm.remote.endpoint"},
		{"the trainer granted to the plugin", loop([]string{"llm", "tuner"}, `{"endpoint": "tuner"}`), "body.capabilities.http[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, raw := dev.callRaw("POST", "/v1/runs", op, "application/json", tc.body)
			if code != http.StatusUnprocessableEntity || !strings.Contains(string(raw), tc.field) {
				t.Fatalf("got %d %s, want 422 naming %s", code, raw, tc.field)
			}
		})
	}

	var ref struct {
		ID string `json:"id"`
	}
	if code, _, raw := dev.call("POST", "/v1/runs", op, loop([]string{"llm"}, `{"endpoint": "tuner"}`), &ref); code != http.StatusCreated {
		t.Fatalf("a loop naming the cluster's trainer: %d %s", code, raw)
	}
	waitRun(t, dev, ref.ID, 3*time.Minute, func(r runView) bool { return r.Progress.State == "succeeded" })
	mu.Lock()
	defer mu.Unlock()
	if len(stolen) > 0 {
		t.Errorf("the operator's server got %d requests (Authorization %q)", len(stolen), stolen)
	}
	if len(steps) < 3 {
		t.Errorf("the cluster's trainer got steps %v, want 3", steps)
	}
}

// TestTemporalUIRefusesWrites: dev's Temporal UI has no login, so it is
// read-only unless dev was started with --ui-write-actions. A terminate of
// the cluster's workflow, sent as the UI's own page would (its CSRF cookie
// as X-CSRF-Token) and with no Trainyard token, is refused, and the
// cluster goes on.
func TestTemporalUIRefusesWrites(t *testing.T) {
	t.Parallel()
	dev := sharedDev(t)
	sharedCluster(t, dev, "sec-ui", `
name: sec-ui
defaults: {provider: local, provisioner: {kind: local}}
nodes: [{name: ui-a}]
`)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := c.Get(dev.ep.TemporalUI + "/api/v1/settings")
	if err != nil {
		t.Fatal(err)
	}
	var settings struct {
		DisableWriteActions bool
	}
	json.NewDecoder(resp.Body).Decode(&settings)
	resp.Body.Close()
	if !settings.DisableWriteActions {
		t.Errorf("the UI's settings allow write actions")
	}
	u, _ := url.Parse(dev.ep.TemporalUI)
	var csrf string
	for _, ck := range jar.Cookies(u) {
		if ck.Name == "_csrf" {
			csrf = ck.Value
		}
	}
	if csrf == "" {
		t.Fatal("the UI handed out no _csrf cookie")
	}
	req, _ := http.NewRequest("POST", dev.ep.TemporalUI+"/api/v1/namespaces/default/workflows/"+url.PathEscape("cluster/sec-ui")+"/terminate",
		strings.NewReader(`{"reason": "from the UI, no token"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", csrf)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("terminate through the UI: %d %s, want 405", resp.StatusCode, body)
	}
	var st clusterStatus
	if code, _, raw := dev.call("GET", "/v1/clusters/sec-ui", dev.admin, nil, &st); code != 200 || len(st.Nodes) != 1 {
		t.Fatalf("cluster after the UI's terminate: %d %s", code, raw)
	}
}

// TestNamesCheckedAtTheDoor: names and keys that would walk a path, forge
// a log line or fail only on a node are refused by the API with the field
// (one validator per kind of name, internal/names).
func TestNamesCheckedAtTheDoor(t *testing.T) {
	t.Parallel()
	dev := sharedDev(t)
	op := operatorToken(t, dev, "names-operator")
	for _, tc := range []struct{ name, path, body, field string }{
		{"run name with NUL", "/v1/runs", `{"cluster": "no-such", "env": "CartPole-v1", "name": "a\u0000b"}`, "body.name"},
		{"run name with a newline", "/v1/runs", `{"cluster": "no-such", "env": "CartPole-v1", "name": "ok\nlevel=error msg=forged"}`, "body.name"},
		{"run name of 5,000 characters", "/v1/runs", `{"cluster": "no-such", "env": "CartPole-v1", "name": "` + strings.Repeat("n", 5000) + `"}`, "body.name"},
		{"run cluster that walks", "/v1/runs", `{"cluster": "../lab", "env": "CartPole-v1"}`, "body.cluster"},
		{"sweep name with NUL", "/v1/sweeps", `{"name": "s\u0000", "run": {"cluster": "no-such", "env": "CartPole-v1"}, "grid": {"seed": [1, 2]}}`, "body.name"},
		{"job env key that walks", "/v1/jobs", `{"cluster": "no-such", "command": ["true"], "roles": [{"name": "r", "count": 1, "cpus": 0.5}], "env": {"../X": "1"}}`, "body.env.../X"},
		{"job env key with NUL", "/v1/clusters/no-such/jobs", `{"command": ["true"], "env": {"A\u0000B": "1"}}`, "body.env.A"},
		{"job env key with =", "/v1/clusters/no-such/jobs", `{"command": ["true"], "env": {"A=B": "1"}}`, "body.env.A=B"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, raw := dev.callRaw("POST", tc.path, op, "application/json", tc.body)
			if code != http.StatusUnprocessableEntity || !strings.Contains(string(raw), tc.field) || hdr.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("got %d %.400s, want a 422 problem naming %s", code, raw, tc.field)
			}
		})
	}
}

// TestReservationsComeBack: a job, a run and a self-play loop terminated
// from Temporal itself (as the Web UI or `temporal workflow terminate`
// would), and 50 runs cancelled right after they were submitted, leave
// nothing held: the
// cluster takes back what closed workflows hold within its reconcile
// period, and `cluster down` then drains at once instead of timing out.
func TestReservationsComeBack(t *testing.T) {
	t.Parallel()
	dev := sharedDev(t)
	cli(t, dev, "cluster", "up", "-f", writeFile(t, "res.yaml", `
name: sec-res
defaults: {provider: local, provisioner: {kind: local}}
nodes: [{name: res-a}, {name: res-b}]
`))
	tc, err := client.Dial(client.Options{HostPort: dev.ep.Temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	var job struct {
		WorkflowID string `json:"workflow_id"`
	}
	if code, _, raw := dev.call("POST", "/v1/clusters/sec-res/jobs", dev.admin, map[string]any{"command": []string{"sleep", "600"}, "cpus": 0.5}, &job); code != http.StatusCreated {
		t.Fatalf("submit job: %d %s", code, raw)
	}
	var run struct {
		ID         string `json:"id"`
		WorkflowID string `json:"workflow_id"`
	}
	if code, _, raw := dev.call("POST", "/v1/runs", dev.admin, `{"cluster": "sec-res", "env": "CartPole-v1", "iterations": 100000, "cpus": 0.5}`, &run); code != http.StatusCreated {
		t.Fatalf("submit run: %d %s", code, raw)
	}
	if code, raw := upload(t, dev, dev.admin, plugintest.BuildGo(t, "./plugins/kinrow/square8_2p"), nil); code != http.StatusCreated {
		t.Fatalf("upload square8_2p: %d %s", code, raw)
	}
	if code, _, raw := dev.call("POST", "/v1/selfplay", dev.admin, `{"cluster":"sec-res","config":"square8_2p","settings":{"generations":1,
		"games_per_generation":100000,"simulations":16,"sync_interval":1000000000,"seed":5,"quality":{"min_games":24}}}`, nil); code != http.StatusCreated {
		t.Fatalf("start loop: %d %s", code, raw)
	}
	waitFor(t, func() bool { return getJob(t, dev, job.WorkflowID).Progress.State == "running" })
	waitRun(t, dev, run.ID, 2*time.Minute, func(r runView) bool { return r.Progress.State == "running" })
	waitLoop(t, dev, "sec-res/square8_2p", 2*time.Minute, func(sp api.Selfplay) bool {
		return sp.State.Phase == "selfplay" && sp.Live != nil && sp.Live.Played >= 1
	})
	for _, id := range []string{job.WorkflowID, run.WorkflowID, selfplay.WorkflowID("sec-res", "square8_2p")} {
		if err := tc.TerminateWorkflow(context.Background(), id, "", "terminated from Temporal, not through Trainyard"); err != nil {
			t.Fatalf("terminate %s: %v", id, err)
		}
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r struct {
				ID string `json:"id"`
			}
			body := fmt.Sprintf(`{"cluster": "sec-res", "env": "CartPole-v1", "iterations": 1000, "cpus": 0.5, "seed": %d}`, i)
			if code, _, raw := dev.call("POST", "/v1/runs", dev.admin, body, &r); code != http.StatusCreated {
				t.Errorf("submit run %d: %d %s", i, code, raw)
				return
			}
			if code, _, raw := dev.call("POST", "/v1/runs/"+r.ID+"/cancel", dev.admin, nil, nil); code >= 300 {
				t.Errorf("cancel run %s: %d %s", r.ID, code, raw)
			}
		}()
	}
	wg.Wait()

	deadline := time.Now().Add(2*cluster.ReconcileEvery + time.Minute)
	for {
		var st clusterStatus
		if code, _, raw := dev.call("GET", "/v1/clusters/sec-res", dev.admin, nil, &st); code != 200 {
			t.Fatalf("cluster status: %d %s", code, raw)
		}
		var held []string
		for _, n := range st.Nodes {
			held = append(held, n.Jobs...)
		}
		if len(held) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster still holds %v after %v", held, 2*cluster.ReconcileEvery+time.Minute)
		}
		time.Sleep(time.Second)
	}
	cli(t, dev, "cluster", "down", "sec-res")
	var st struct {
		Events []string `json:"events"`
	}
	if code, _, raw := dev.call("GET", "/v1/clusters/sec-res", dev.admin, nil, &st); code != 200 {
		t.Fatalf("cluster status after down: %d %s", code, raw)
	}
	for _, e := range st.Events {
		if strings.Contains(e, "drain timed out") {
			t.Errorf("cluster down: %s", e)
		}
	}
}
