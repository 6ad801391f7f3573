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
	dev := startDev(t, t.TempDir())
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
