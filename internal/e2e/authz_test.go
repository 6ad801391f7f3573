package e2e

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
)

// TestAuthorizationMatrix calls every route of the OpenAPI document with no
// token and with each role: below the route's role it must be 401/403,
// at or above it never, and never a 5xx; every error is problem+json.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	dev := sharedDev(t)
	tokens := map[string]string{"admin": dev.admin}
	for _, role := range []string{"viewer", "operator"} {
		var out struct {
			Token string `json:"token"`
		}
		if code, _, raw := dev.call("POST", "/v1/tokens", dev.admin, map[string]string{"name": role, "role": role}, &out); code != http.StatusCreated {
			t.Fatalf("create %s token: %d %s", role, code, raw)
		}
		tokens[role] = out.Token
	}
	rank := map[string]int{"": 0, "viewer": 1, "operator": 2, "admin": 3}

	resp, err := http.Get(dev.ep.API + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Role string `json:"x-trainyard-role"`
		} `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var paths []string
	for p := range doc.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	routes := 0
	for _, path := range paths {
		for method, op := range doc.Paths[path] {
			method = strings.ToUpper(method)
			concrete := path
			for strings.Contains(concrete, "{") {
				i, j := strings.Index(concrete, "{"), strings.Index(concrete, "}")
				concrete = concrete[:i] + "no-such-thing" + concrete[j+1:]
			}
			routes++
			for _, who := range []string{"", "viewer", "operator", "admin"} {
				code, hdr, raw := dev.callRaw(method, concrete, tokens[who], "application/json", "{}")
				label := method + " " + path + " as " + map[bool]string{true: "no token", false: who}[who == ""]
				switch {
				case code >= 500:
					t.Errorf("%s: %d %s", label, code, raw)
				case op.Role != "" && who == "" && code != http.StatusUnauthorized:
					t.Errorf("%s: %d, want 401", label, code)
				case op.Role != "" && who != "" && rank[who] < rank[op.Role] && code != http.StatusForbidden:
					t.Errorf("%s: %d, want 403 (needs %s)", label, code, op.Role)
				case rank[who] >= rank[op.Role] && (code == http.StatusUnauthorized || code == http.StatusForbidden):
					t.Errorf("%s: %d, but the role suffices (needs %q): %s", label, code, op.Role, raw)
				}
				if code >= 400 && hdr.Get("Content-Type") != "application/problem+json" {
					t.Errorf("%s: error %d as %q, want application/problem+json", label, code, hdr.Get("Content-Type"))
				}
			}
		}
	}
	if routes < 30 {
		t.Fatalf("only %d routes in the OpenAPI document", routes)
	}
	t.Logf("%d routes × 4 callers checked", routes)
}

// TestAPIBadInput sends malformed, oversized, wrongly typed and unknown-field
// bodies to every route of the OpenAPI document as admin: never a 5xx, and
// every error is problem+json.
func TestAPIBadInput(t *testing.T) {
	t.Parallel()
	dev := sharedDev(t)
	resp, err := http.Get(dev.ep.API + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	bodies := map[string]string{
		"malformed":     `{"name": "x",`,
		"not an object": `[1, 2, 3]`,
		"wrong types":   `{"name": 5, "role": true, "command": "ls", "gpus": "many", "cpus": [], "modules": 3, "data": "x", "envs": -1, "steps": 1e99}`,
		"unknown field": `{"surprise": {"deep": [null]}}`,
		"oversized":     `{"name": "` + strings.Repeat("a", 3<<20) + `"}`,
		"binary":        "\x00\xff\xfe garbage \x01",
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			method = strings.ToUpper(method)
			if method == "GET" {
				continue
			}
			concrete := path
			for strings.Contains(concrete, "{") {
				i, j := strings.Index(concrete, "{"), strings.Index(concrete, "}")
				concrete = concrete[:i] + "x" + concrete[j+1:]
			}
			for name, body := range bodies {
				code, hdr, raw := dev.callRaw(method, concrete, dev.admin, "application/json", body)
				if code >= 500 {
					t.Errorf("%s %s with %s body: %d %.300s", method, path, name, code, raw)
				}
				if code >= 400 && hdr.Get("Content-Type") != "application/problem+json" {
					t.Errorf("%s %s with %s body: %d as %q", method, path, name, code, hdr.Get("Content-Type"))
				}
			}
		}
	}
	if code, _, _ := dev.call("GET", "/readyz", "", nil, nil); code != 200 {
		t.Fatalf("server not ready after the bad input: %d", code)
	}
}
