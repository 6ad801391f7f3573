package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPolicyAsCode: the default bundle is in force and its tests pass; a
// proposed bundle (GPU preservation on) is dry-run against the queue and
// names exactly the job it would deny and why; pushed, it denies the next
// GPU job with a 403 listing the rule; broken bundles are refused; every
// decision is listed.
func TestPolicyAsCode(t *testing.T) {
	t.Parallel()
	dev := startDev(t, t.TempDir())
	cli(t, dev, "cluster", "up", "-f", writeFile(t, "lab.yaml", localSpec), "--heartbeat-timeout", "5s")

	var cur struct {
		Revision  string `json:"revision"`
		Evaluator string `json:"evaluator"`
		Bundle    struct {
			Modules map[string]string `json:"modules"`
		} `json:"bundle"`
	}
	if code, _, raw := dev.call("GET", "/v1/policies", dev.admin, nil, &cur); code != 200 || cur.Bundle.Modules["admission.rego"] == "" || cur.Evaluator != "wasm" {
		t.Fatalf("get policies (the default bundle is decided by its Wasm compilation): %d %.300s", code, raw)
	}
	if out := cli(t, dev, "policy", "test", "../../policies"); !strings.Contains(out, " passed, 0 failed") {
		t.Fatalf("policy test: %s", out)
	}

	gpuJob := submitJob(t, dev, []string{"true"}, 1)
	cpuJob := submitJob(t, dev, []string{"true"}, 0)

	// Proposed: reserve GPU 0 of every node for inference (seed 000).
	proposed := copyDir(t, "../../policies")
	var data map[string]any
	raw, _ := os.ReadFile(filepath.Join(proposed, "data.json"))
	json.Unmarshal(raw, &data)
	gp := data["trainyard"].(map[string]any)["params"].(map[string]any)["gpu_preservation"].(map[string]any)
	gp["enabled"], gp["reserved_per_node"] = true, 1
	raw, _ = json.MarshalIndent(data, "", "  ")
	os.WriteFile(filepath.Join(proposed, "data.json"), raw, 0o644)

	out := cli(t, dev, "policy", "dry-run", proposed, "-o", "json")
	var dry struct {
		Evaluated int         `json:"evaluated"`
		Changes   []dryChange `json:"changes"`
	}
	if err := json.Unmarshal([]byte(out), &dry); err != nil {
		t.Fatal(err, out)
	}
	if dry.Evaluated < 2 || len(dry.Changes) != 1 || dry.Changes[0].WorkID != gpuJob || !dry.Changes[0].Before.Allow || dry.Changes[0].After.Allow ||
		len(dry.Changes[0].Added) == 0 {
		t.Fatalf("dry run should flip exactly the GPU job %s (not %s): %s", gpuJob, cpuJob, out)
	}

	// Its unit tests encode the old data, so it is refused as it stands.
	msg, err := exec.Command(binary, "policy", "push", proposed, "--data-dir", dev.dir).CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "its tests fail") {
		t.Fatalf("push of a bundle whose tests fail: %v %s", err, msg)
	}

	// A new rule with its own test goes in force and is enforced.
	pause := copyDir(t, "../../policies")
	os.WriteFile(filepath.Join(pause, "gpu_pause.rego"), []byte(`package trainyard.admission

import rego.v1

# Inference peak: plain jobs get no GPUs until it is over.
deny contains {"rule": "gpu_pause", "reason": sprintf("role %s asks for %v GPU(s); GPU jobs are paused for the inference peak", [r.name, r.gpus])} if {
	input.work.kind == "job"
	some r in input.work.roles
	r.gpus > 0
}
`), 0o644)
	os.WriteFile(filepath.Join(pause, "gpu_pause_test.rego"), []byte(`package trainyard.admission_test

import rego.v1

import data.trainyard.admission

test_gpu_job_paused if {
	d := admission.deny with input as {"work": {"kind": "job", "roles": [{"name": "job", "count": 1, "cpus": 1, "memory_mb": 0, "gpus": 1}]}, "cluster": {"nodes": [{"name": "n", "cpus": 4, "memory_mb": 1000}]}}
	some v in d
	v.rule == "gpu_pause"
}
`), 0o644)
	cli(t, dev, "policy", "push", pause)
	if out := cli(t, dev, "policy", "show"); !strings.Contains(out, "gpu_pause.rego") || !regexp.MustCompile(`evaluator\s+wasm`).MatchString(out) {
		t.Fatalf("policy show after the push: %s", out)
	}
	code, hdr, body := dev.call("POST", "/v1/clusters/lab/jobs", dev.admin, map[string]any{"command": []string{"true"}, "gpus": 1}, nil)
	assertProblem(t, code, hdr, body, http.StatusForbidden, "policy.gpu_pause")
	if code, _, raw := dev.call("POST", "/v1/clusters/lab/jobs", dev.admin, map[string]any{"command": []string{"true"}}, nil); code != http.StatusCreated {
		t.Fatalf("CPU job under the new policy: %d %s", code, raw)
	}

	// Broken bundles never go in force.
	broken := copyDir(t, proposed)
	os.WriteFile(filepath.Join(broken, "capacity.rego"), []byte("package trainyard.admission\nthis is not rego\n"), 0o644)
	msg, err = exec.Command(binary, "policy", "push", broken, "--data-dir", dev.dir).CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "422") {
		t.Fatalf("push of unparsable bundle: %v %s", err, msg)
	}
	failing := copyDir(t, proposed)
	os.WriteFile(filepath.Join(failing, "zz_test.rego"), []byte("package trainyard.admission_test\nimport rego.v1\ntest_always_fails if { 1 == 2 }\n"), 0o644)
	msg, err = exec.Command(binary, "policy", "push", failing, "--data-dir", dev.dir).CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "test_always_fails") {
		t.Fatalf("push of a bundle with a failing test: %v %s", err, msg)
	}

	var log struct {
		Decisions []struct {
			WorkID     string `json:"work_id"`
			Allow      bool   `json:"allow"`
			Revision   string `json:"revision"`
			InputHash  string `json:"input_hash"`
			Violations []struct {
				Rule string `json:"rule"`
			} `json:"violations"`
		} `json:"decisions"`
	}
	dev.call("GET", "/v1/admission/decisions", dev.admin, nil, &log)
	if len(log.Decisions) != 4 || log.Decisions[0].WorkID != gpuJob || !log.Decisions[0].Allow || log.Decisions[2].Allow ||
		len(log.Decisions[2].Violations) == 0 || log.Decisions[2].Revision == log.Decisions[0].Revision || log.Decisions[0].InputHash == "" {
		t.Fatalf("decision log: %+v", log.Decisions)
	}

	// Decisions by result show on the Prometheus endpoint (no token needed).
	resp, err := http.Get(dev.ep.API + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`trainyard_admission_decisions_total{`, `result="deny"`, `result="allow"`, "http_server_request_duration"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// A placement rule in Rego decides live: the cluster asks the bundle
	// about each placement its scheduler proposes. Work of config "pinned"
	// runs on worker-2 only; work of config "nowhere" waits, the rule's
	// reason in its status, until a bundle without that rule is in force.
	pinned := copyDir(t, pause)
	os.WriteFile(filepath.Join(pinned, "pinned.rego"), []byte(`package trainyard.admission

import rego.v1

placement_deny contains {"rule": "pinned", "reason": sprintf("config pinned runs on worker-2 only, not on %s", [p.node])} if {
	input.work.config == "pinned"
	some p in input.placement
	p.node != "worker-2"
}

placement_deny contains {"rule": "nowhere", "reason": "config nowhere is not placed"} if {
	input.work.config == "nowhere"
	count(input.placement) > 0
}
`), 0o644)
	cli(t, dev, "policy", "push", pinned)
	g := gate{t.TempDir()}
	for range 3 {
		id := workJob(t, dev, oneRole("lab", "job", "pinned", 0, g.cmd("pinned")))
		if j := waitJob(t, dev, id, "running", running); j.Progress.Node != "worker-2" {
			t.Fatalf("job %s of config pinned runs on %s, want worker-2 (the rule in force)", id, j.Progress.Node)
		}
	}
	g.open(t, "pinned")
	nowhere := workJob(t, dev, oneRole("lab", "job", "nowhere", 0, []string{"true"}))
	waitJob(t, dev, nowhere, "waiting on the rule", func(j placedJob) bool {
		return j.Progress.State == "waiting" && strings.Contains(j.Progress.Reason, "policy: nowhere: config nowhere is not placed")
	})
	cli(t, dev, "policy", "push", pause)
	waitJob(t, dev, nowhere, "placed once the rule is gone", func(j placedJob) bool { return j.Progress.Node != "" })
	cli(t, dev, "cluster", "down", "lab")
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".rego") || e.Name() == "data.json") {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(src, e.Name()))
		os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
	}
	return dst
}
