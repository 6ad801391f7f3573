package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/joinkey"
	"github.com/trainyard/trainyard/workflows/cluster"
)

func TestLoadAgentSecrets(t *testing.T) {
	tok, _ := joinkey.New()
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, path, env, wantToken, wantErr string
	}{
		{"yaml file", write("a.yaml", "join_token: "+tok.String()+"\ns3_access_key_id: k\n", 0o600), "", tok.String(), ""},
		{"json file (what provisioners write)", write("b.json", `{"join_token":"x"}`, 0o600), "", "x", ""},
		{"readable by others", write("c.yaml", "join_token: x\n", 0o644), "", "", "readable by others"},
		{"unknown field", write("d.yaml", "join_secret: x\n", 0o600), "", "", "join_secret"},
		{"missing", filepath.Join(dir, "none"), "", "", "no such file"},
		{"environment, the older static way", "", "legacy", "legacy", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TRAINYARD_AGENT_CONFIG", "")
			t.Setenv("TRAINYARD_JOIN_SECRET", tc.env)
			s, err := loadAgentSecrets(tc.path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || s.JoinToken != tc.wantToken {
				t.Fatalf("token %q, err %v; want %q", s.JoinToken, err, tc.wantToken)
			}
		})
	}
	// A token signs; anything else is sent as the legacy secret.
	hb := cluster.Heartbeat{Node: "n", AgentID: "a"}
	agentSecrets{JoinToken: tok.String()}.sign(&hb, 42)
	if hb.Secret != "" || !joinkey.Verify(tok.Public(), "n", "a", 42, hb.Sig) {
		t.Fatalf("signed heartbeat %+v", hb)
	}
	agentSecrets{JoinToken: "legacy"}.sign(&hb, 43)
	if hb.Secret != "legacy" {
		t.Fatalf("legacy heartbeat %+v", hb)
	}
}
