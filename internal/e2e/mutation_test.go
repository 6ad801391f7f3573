package e2e

import (
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/policies"
)

// TestEveryRuleDecidesLive is issue 30's mutation test of the bundle, live:
// for each rule of policies/, a bundle with that rule disabled is pushed to
// `trainyard dev`, and a submission the rule decided is decided otherwise
// (capabilities: TestLLMRunGrantsEndpoint, which has an endpoint). The
// "input" rule is left out on purpose: it fails closed on a malformed
// admission input, which no submission can produce (policies/
// admission_test.rego covers it).
// Between rules the shipped bundle goes back in force (its modules, GPU
// preservation on in its data, its tests left out: they encode the
// shipped data and the rule). The placement_deny halves of these rules
// are shown live by TestPolicyAsCode and TestPlacementRulesDecideLive:
// removing one changes nothing while the scheduler's filters propose only
// placements it accepts, which is the point of both.
func TestEveryRuleDecidesLive(t *testing.T) {
	t.Parallel()
	dev := placementDev(t, "lab", localSpec)
	base := shippedBundle(t)
	role := func(name string, gpus float64, memoryMB int64) []any {
		return []any{map[string]any{"name": name, "cpus": 0.5, "gpus": gpus, "memory_mb": memoryMB}}
	}
	submit := func(work map[string]any) (int, http.Header, []byte) {
		body := maps.Clone(work)
		body["cluster"], body["command"] = "lab", []string{"true"}
		return dev.call("POST", "/v1/jobs", dev.admin, body, nil)
	}
	for _, tc := range []struct {
		rule    string
		work    map[string]any
		without int // the status with the rule disabled
	}{
		// Without the rule the scheduler's feasibility check refuses it.
		{"node_capacity", map[string]any{"roles": role("main", 0, 1<<40)}, http.StatusUnprocessableEntity},
		{"gpu_preservation", map[string]any{"roles": role("selfplay", 1, 64)}, http.StatusCreated},
		{"gpu_tier", map[string]any{"config": "square19_2p", "roles": role("main", 1, 64)}, http.StatusUnprocessableEntity},
		{"provider", map[string]any{"kind": "training", "providers": map[string]any{"prefer": []string{"vast"}}, "roles": role("main", 0, 64)}, http.StatusCreated},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			pushBundle(t, dev, base)
			code, hdr, raw := submit(tc.work)
			assertProblem(t, code, hdr, raw, http.StatusForbidden, "policy."+tc.rule)
			pushBundle(t, dev, disableRule(t, base, tc.rule))
			if code, _, raw := submit(tc.work); code != tc.without {
				t.Fatalf("with %s disabled: %d, want %d: %s", tc.rule, code, tc.without, raw)
			}
		})
	}

	// A config quota is a share of Tier-1 GPU time over the window: a
	// window of 36 s on a node with two Tier-1 GPUs is 72 GPU-seconds, so a
	// square8 job that has held one GPU for 8 s is over square8_*'s 10 %,
	// and the next GPU job of that config waits; disabling the rule lets it
	// start.
	t.Run("config_quota", func(t *testing.T) {
		cli(t, dev, "cluster", "up", "-f", writeFile(t, "tier1.yaml", `
name: tier1
defaults: {provider: local, provisioner: {kind: local}}
nodes: [{name: t1, resources: {gpus: "2xH100:80GB"}}]
`))
		quick := shippedBundle(t, map[string]any{"quota_window_hours": 0.01})
		pushBundle(t, dev, quick)
		g := gate{t.TempDir()}
		defer g.open(t, "done")
		first := workJob(t, dev, oneRole("tier1", "", "square8_2p", 1, g.cmd("done")))
		waitJob(t, dev, first, "running", running)
		waitFor(t, func() bool {
			var u struct {
				Quotas []struct {
					Config     string  `json:"config"`
					Tier1Share float64 `json:"tier1_share"`
				} `json:"quotas"`
			}
			dev.call("GET", "/v1/usage?cluster=tier1", dev.admin, nil, &u)
			for _, q := range u.Quotas {
				if q.Config == "square8_2p" && q.Tier1Share > 0.15 {
					return true
				}
			}
			return false
		})
		second := workJob(t, dev, oneRole("tier1", "", "square8_2p", 1, g.cmd("done")))
		waitJob(t, dev, second, "waiting on the quota", func(j placedJob) bool {
			return j.Progress.State == "waiting" && strings.Contains(j.Progress.Reason, "config_quota")
		})
		pushBundle(t, dev, disableRule(t, quick, "config_quota"))
		waitJob(t, dev, second, "running once the rule is gone", running)
	})

	// A usage rule holds work in the queue: disabling it lets the waiting
	// training start.
	t.Run("one_training_per_config", func(t *testing.T) {
		pushBundle(t, dev, base)
		g := gate{t.TempDir()}
		defer g.open(t, "done")
		first := workJob(t, dev, oneRole("lab", "training", "square8_2p", 0, g.cmd("done")))
		waitJob(t, dev, first, "running", running)
		second := workJob(t, dev, oneRole("lab", "training", "square8_2p", 0, g.cmd("done")))
		waitJob(t, dev, second, "waiting on the rule", func(j placedJob) bool {
			return j.Progress.State == "waiting" && strings.Contains(j.Progress.Reason, "one_training_per_config")
		})
		pushBundle(t, dev, disableRule(t, base, "one_training_per_config"))
		waitJob(t, dev, second, "running once the rule is gone", running)
	})
}

// shippedBundle is policies/ without its tests, GPU preservation on, and
// with params' top-level keys set from set.
func shippedBundle(t *testing.T, set ...map[string]any) map[string]string {
	t.Helper()
	shipped, err := policy.LoadFS(policies.FS)
	if err != nil {
		t.Fatal(err)
	}
	b := map[string]string{}
	for name, src := range shipped.Modules {
		if !policy.IsTest(name) {
			b[name] = src
		}
	}
	params := shipped.Data["trainyard"].(map[string]any)["params"].(map[string]any)
	params["gpu_preservation"].(map[string]any)["enabled"] = true
	for _, s := range set {
		maps.Copy(params, s)
	}
	raw, err := json.MarshalIndent(shipped.Data, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b["data.json"] = string(raw)
	return b
}

// disableRule returns b with every deny and placement_deny entry of rule
// made unreachable (false as the first condition of its body).
func disableRule(t *testing.T, b map[string]string, rule string) map[string]string {
	t.Helper()
	out := maps.Clone(b)
	head := regexp.MustCompile(`^(deny|placement_deny) contains \{$`)
	n := 0
	for name, src := range b {
		if !strings.HasSuffix(name, ".rego") {
			continue
		}
		var lines []string
		inHead, ours := false, false
		for _, l := range strings.Split(src, "\n") {
			lines = append(lines, l)
			switch {
			case head.MatchString(l):
				inHead, ours = true, false
			case inHead && strings.Contains(l, `"rule": "`+rule+`"`):
				ours = true
			case inHead && l == "} if {":
				if ours {
					lines = append(lines, "\tfalse")
					n++
				}
				inHead = false
			}
		}
		out[name] = strings.Join(lines, "\n")
	}
	if n == 0 {
		t.Fatalf("no entry of rule %s found in the bundle", rule)
	}
	return out
}

// pushBundle writes b to a directory and pushes it with the CLI.
func pushBundle(t *testing.T, dev *devProc, b map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for name, src := range b {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cli(t, dev, "policy", "push", dir)
}
