package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/plugintest"
)

// TestPluginRoundTrip: upload → list → inspect → run, through the API and
// the CLI, against `trainyard dev`; bad modules are refused with the reason,
// and a plugin that running work uses cannot be deleted.
func TestPluginRoundTrip(t *testing.T) {
	t.Parallel()
	env := plugintest.AssemblyScript(t, "cartpole-as")
	reward := plugintest.BuildGo(t, "./plugins/shaping")
	dev := startDev(t, t.TempDir())

	type record struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		Kind     string `json:"kind"`
		Metadata struct {
			Observation struct {
				Shape []int `json:"shape"`
			} `json:"observation_space"`
			Action struct {
				N int `json:"n"`
			} `json:"action_space"`
		} `json:"metadata"`
	}
	var envRec, rewardRec record
	// listed: the uploads are listed, and so are the built-ins registered
	// on start (CartPole-v1 among them).
	listed := func(recs []record, ids ...string) bool {
		seen := map[string]bool{}
		for _, r := range recs {
			seen[r.ID], seen[r.Name] = true, true
		}
		for _, id := range append(ids, "CartPole-v1") {
			if !seen[id] {
				return false
			}
		}
		return true
	}
	if code, raw := upload(t, dev, dev.admin, env, &envRec); code != http.StatusCreated {
		t.Fatalf("upload env: %d %s", code, raw)
	}
	if envRec.Kind != "env" || len(envRec.ID) != 64 || envRec.Metadata.Action.N != 2 || len(envRec.Metadata.Observation.Shape) != 1 || envRec.Metadata.Observation.Shape[0] != 4 {
		t.Fatalf("env record: %+v", envRec)
	}
	if code, raw := upload(t, dev, dev.admin, reward, &rewardRec); code != http.StatusCreated || rewardRec.Kind != "reward" {
		t.Fatalf("upload reward: %d %s", code, raw)
	}

	t.Run("bad uploads", func(t *testing.T) {
		code, raw := upload(t, dev, dev.admin, []byte("definitely not wasm"), nil)
		assertProblem(t, code, http.Header{"Content-Type": {"application/problem+json"}}, raw, http.StatusUnprocessableEntity, "body.module")
		if !strings.Contains(string(raw), "not a WebAssembly module") {
			t.Errorf("reason missing: %s", raw)
		}
		var viewer struct {
			Token string `json:"token"`
		}
		dev.call("POST", "/v1/tokens", dev.admin, map[string]string{"name": "v", "role": "viewer"}, &viewer)
		if code, raw := upload(t, dev, viewer.Token, env, nil); code != http.StatusForbidden {
			t.Fatalf("viewer upload: %d %s", code, raw)
		}
	})

	var list struct {
		Plugins []record `json:"plugins"`
	}
	if code, _, raw := dev.call("GET", "/v1/plugins", dev.admin, nil, &list); code != 200 || !listed(list.Plugins, envRec.ID, rewardRec.ID) {
		t.Fatalf("list: %d %s", code, raw)
	}
	var inspected record
	if code, _, raw := dev.call("GET", "/v1/plugins/"+envRec.Name, dev.admin, nil, &inspected); code != 200 || inspected.ID != envRec.ID {
		t.Fatalf("inspect by name: %d %s", code, raw)
	}

	var run struct {
		WorkflowID string `json:"workflow_id"`
		Stats      struct {
			Steps      int     `json:"steps"`
			Episodes   int     `json:"episodes"`
			MeanReturn float64 `json:"mean_return"`
		} `json:"stats"`
	}
	if code, _, raw := dev.call("POST", "/v1/plugins/"+envRec.ID+"/test-runs", dev.admin, map[string]any{"envs": 16, "steps": 20000, "seed": 7}, &run); code != 200 {
		t.Fatalf("test run: %d %s", code, raw)
	}
	// Random CartPole episodes last ~22 steps on average, never more than 500.
	if run.Stats.Steps < 20000 || run.Stats.Episodes < 20000/500 || run.Stats.MeanReturn < 8 || run.Stats.MeanReturn > 60 {
		t.Fatalf("implausible random CartPole stats: %+v", run.Stats)
	}
	if code, _, raw := dev.call("POST", "/v1/plugins/"+rewardRec.ID+"/test-runs", dev.admin, map[string]any{}, nil); code != http.StatusUnprocessableEntity {
		t.Fatalf("test run of a reward plugin: %d %s", code, raw)
	}

	t.Run("cli", func(t *testing.T) {
		out := cli(t, dev, "plugin", "ls", "-o", "json")
		var recs []record
		if err := json.Unmarshal([]byte(out), &recs); err != nil || !listed(recs, envRec.ID, rewardRec.ID) {
			t.Fatalf("plugin ls: %v\n%s", err, out)
		}
		out = cli(t, dev, "plugin", "inspect", envRec.ID, "-o", "json")
		if !strings.Contains(out, `"observation_space"`) {
			t.Fatalf("plugin inspect: %s", out)
		}
		file := filepath.Join(t.TempDir(), "cartpole.wasm")
		os.WriteFile(file, env, 0o644)
		out = cli(t, dev, "plugin", "run", file, "--steps", "5000", "--envs", "8")
		if !strings.Contains(out, "steps/s") || !strings.Contains(out, "cartpole") {
			t.Fatalf("plugin run: %s", out)
		}
		// Downloaded by reference from the API, run locally.
		out = cli(t, dev, "plugin", "run", envRec.Name, "--steps", "2000", "-o", "json")
		if !strings.Contains(out, `"episodes"`) {
			t.Fatalf("plugin run by ref: %s", out)
		}
		// build + push: the same bytes give the same content address.
		built := strings.TrimSpace(cli(t, dev, "plugin", "build", "../../plugins/shaping", "-O", filepath.Join(t.TempDir(), "s.wasm")))
		if out := cli(t, dev, "plugin", "push", built); !strings.Contains(out, rewardRec.ID[:12]) {
			t.Fatalf("plugin build+push: want id %s: %s", rewardRec.ID[:12], out)
		}
		cmd := exec.Command(binary, "plugin", "inspect", "no-such-plugin", "--data-dir", dev.dir)
		msg, err := cmd.CombinedOutput()
		if err == nil || strings.Count(strings.TrimSpace(string(msg)), "\n") != 0 || !strings.Contains(string(msg), "404") {
			t.Fatalf("missing plugin: want one error line with 404 and non-zero exit, got %v: %s", err, msg)
		}
	})

	t.Run("delete refused while in use", func(t *testing.T) {
		tc, err := client.Dial(client.Options{HostPort: dev.ep.Temporal})
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		// A running workflow that declares it uses the env plugin; nothing
		// polls its queue, so it stays running until terminated.
		key := temporal.NewSearchAttributeKeyKeywordList("TrainyardPlugins")
		wr, err := tc.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
			ID: "uses-cartpole", TaskQueue: "nobody-polls-this",
			TypedSearchAttributes: temporal.NewSearchAttributes(key.ValueSet([]string{envRec.ID})),
		}, "SomeTraining")
		if err != nil {
			t.Fatal(err)
		}
		// Visibility indexes the workflow a moment after it starts; a DELETE
		// before that would succeed, so wait until it is listed.
		waitFor(t, func() bool {
			n, err := tc.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{
				Query: "TrainyardPlugins = '" + envRec.ID + "' AND ExecutionStatus = 'Running'"})
			return err == nil && n.GetCount() > 0
		})
		if code, _, raw := dev.call("DELETE", "/v1/plugins/"+envRec.ID, dev.admin, nil, nil); code != http.StatusConflict {
			t.Fatalf("delete of a plugin in use: want 409, got %d: %s", code, raw)
		}
		if err := tc.TerminateWorkflow(context.Background(), wr.GetID(), "", "test done"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool {
			code, _, _ := dev.call("DELETE", "/v1/plugins/"+envRec.ID, dev.admin, nil, nil)
			return code == http.StatusNoContent
		})
		if code, _, _ := dev.call("GET", "/v1/plugins/"+envRec.ID, dev.admin, nil, nil); code != http.StatusNotFound {
			t.Fatalf("deleted plugin still served: %d", code)
		}
	})
}

func upload(t *testing.T, dev *devProc, token string, wasm []byte, out any) (int, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := map[string][]string{
		"Content-Disposition": {`form-data; name="module"; filename="p.wasm"`},
		"Content-Type":        {"application/wasm"},
	}
	pw, _ := mw.CreatePart(h)
	pw.Write(wasm)
	mw.Close()
	req, _ := http.NewRequest("POST", dev.ep.API+"/v1/plugins", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, raw
}

// cli runs the trainyard binary against dev and returns its stdout.
func cli(t testing.TB, dev *devProc, args ...string) string {
	t.Helper()
	// Flags go before a "--" that ends them (a command to run).
	i := slices.Index(args, "--")
	if i < 0 {
		i = len(args)
	}
	cmd := exec.Command(binary, slices.Concat(args[:i], []string{"--data-dir", dev.dir}, args[i:])...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("trainyard %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
