package e2e

import (
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/inference/inferencetest"
	"github.com/trainyard/trainyard/internal/plugintest"
	arith "github.com/trainyard/trainyard/plugins/arithmetic/problem"
)

// TestLLMRunGrantsEndpoint: a cluster declares an OpenAI-compatible
// endpoint (a real chat-completions server on loopback); the arithmetic
// text env, which calls it, uploads; a run must grant the endpoint (422
// otherwise, naming the field), may grant only declared endpoints, and with
// the grant trains through every step's inference call.
func TestLLMRunGrantsEndpoint(t *testing.T) {
	t.Parallel()
	wasm := plugintest.BuildGo(t, "./plugins/arithmetic")
	srv := inferencetest.Start(t, "arith-1b")
	srv.Answer = func(msgs []inference.ChatMessage) string {
		p, _ := arith.Parse(msgs[len(msgs)-1].Content)
		return strconv.Itoa(p.Answer())
	}
	spec := fmt.Sprintf(`
name: lab
defaults:
  provider: local
  provisioner: {kind: local}
nodes:
  - {name: node-a}
endpoints:
  - {name: llm, url: %q, model: arith-1b, max_concurrency: 8}
`, srv.URL)
	specFile := writeFile(t, "lab.yaml", spec)

	// The endpoint is healthy from here (the CLI reads the same spec).
	out, err := exec.Command(binary, "endpoint", "check", specFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "true") {
		t.Fatalf("trainyard endpoint check: %v\n%s", err, out)
	}

	dev := startDev(t, t.TempDir())
	cli(t, dev, "cluster", "up", "-f", specFile)
	t.Cleanup(func() { killAgentsOf(dev.dir) })
	var st struct {
		Endpoints []struct {
			Name string `json:"name"`
			URL  string `json:"url"`
		} `json:"endpoints"`
	}
	if code, _, raw := dev.call("GET", "/v1/clusters/lab", dev.admin, nil, &st); code != 200 || len(st.Endpoints) != 1 || st.Endpoints[0].Name != "llm" {
		t.Fatalf("cluster status: %d %s", code, raw)
	}
	var eps struct {
		Endpoints []struct {
			Name    string   `json:"name"`
			Healthy bool     `json:"healthy"`
			Models  []string `json:"models"`
		} `json:"endpoints"`
	}
	if code, _, raw := dev.call("GET", "/v1/clusters/lab/endpoints", dev.admin, nil, &eps); code != 200 || len(eps.Endpoints) != 1 || !eps.Endpoints[0].Healthy {
		t.Fatalf("cluster endpoints: %d %s", code, raw)
	}
	if out := cli(t, dev, "endpoint", "status", "lab"); !strings.Contains(out, "llm") || !strings.Contains(out, "true") {
		t.Fatalf("endpoint status: %s", out)
	} else {
		t.Logf("trainyard endpoint status lab:\n%s", out)
	}
	if out := cli(t, dev, "cluster", "status", "lab"); !strings.Contains(out, "ENDPOINT") || !strings.Contains(out, "llm") || !strings.Contains(out, "true") {
		t.Fatalf("cluster status does not show the endpoint's health: %s", out)
	}
	var rec struct {
		ID string `json:"id"`
	}
	if code, raw := upload(t, dev, dev.admin, wasm, &rec); code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, raw)
	}

	const base = `"cluster":"lab","env":"arithmetic","iterations":2,"checkpoint_every":1,"envs_per_worker":2,"episode_length":8,"batch_size":8,"seed":1`
	for _, tc := range []struct{ name, body, loc string }{
		{"no grant", `{` + base + `}`, "body.capabilities.http"},
		{"endpoint the cluster lacks", `{` + base + `,"capabilities":{"http":["gpt"]}}`, "body.capabilities.http[0]"},
		{"bad name", `{` + base + `,"capabilities":{"http":["https://api.openai.com"]}}`, "body.capabilities.http[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, raw := dev.call("POST", "/v1/runs", dev.admin, tc.body, nil)
			assertProblem(t, code, hdr, raw, http.StatusUnprocessableEntity, tc.loc)
			t.Logf("%s", raw)
		})
	}
	if srv.Requests() != 0 {
		t.Fatalf("refused runs reached the endpoint %d times", srv.Requests())
	}

	// The rate cap is the bundle's alone (policies/capabilities.rego): with
	// the cluster capped at 100 requests/s the run is refused, and with the
	// rule disabled the same run is admitted (mutation, as
	// TestEveryRuleDecidesLive does for the other rules).
	body := `{` + base + `,"capabilities":{"http":["llm"],"http_rate":500}}`
	capped := shippedBundle(t, map[string]any{"capabilities": map[string]any{"max_http_rate": 100}})
	pushBundle(t, dev, capped)
	code, hdr, raw := dev.call("POST", "/v1/runs", dev.admin, body, nil)
	assertProblem(t, code, hdr, raw, http.StatusForbidden, "policy.capabilities")
	if !strings.Contains(string(raw), "exceeds the cluster's limit of 100") {
		t.Fatalf("refusal does not give the cap: %s", raw)
	}
	pushBundle(t, dev, disableRule(t, capped, "capabilities"))

	var ref struct {
		ID string `json:"id"`
	}
	if code, _, raw := dev.call("POST", "/v1/runs", dev.admin, body, &ref); code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, raw)
	}
	r := waitRun(t, dev, ref.ID, 3*time.Minute, func(r runView) bool { return r.Status != "running" })
	t.Logf("run %s: %s, iteration %d, mean return %.2f; endpoint answered %d chat completions (peak %d at once)",
		r.ID, r.Status, r.Progress.Iteration, r.Progress.MeanReturn, srv.Completed(), srv.PeakInFlight())
	if r.Status != "completed" || r.Progress.Iteration != 2 || srv.Completed() < 2*2*8 || r.Progress.MeanReturn != 1 {
		t.Fatalf("run: %s %q %+v; %d completions", r.Status, r.Error, r.Progress, srv.Completed())
	}
}
