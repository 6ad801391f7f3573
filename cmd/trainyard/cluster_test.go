package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteAgentEnv: the agent's environment reads back the same through a
// shell's `set -a; . FILE` (systemd's EnvironmentFile takes the same
// quoting), and a bad keys file is an error naming the flag.
func TestWriteAgentEnv(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.json")
	os.WriteFile(keys, []byte(`{"access_key_id":"AK","secret_access_key":"s e'c/r+t"}`), 0o600)
	j := &joinInfo{Token: "tyj_abc.def", ID: "k1", Temporal: "198.18.0.1:7233", S3: "http://198.18.0.1:9000", S3Bucket: "trainyard"}
	var b strings.Builder
	if err := writeAgentEnv(&b, "lab", j, keys); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "agent.env")
	os.WriteFile(file, []byte(b.String()), 0o600)
	out, err := exec.Command("bash", "-c", `set -a; . "$1"; printf '%s\n' "$TRAINYARD_CLUSTER" "$TRAINYARD_TEMPORAL_ADDRESS" "$TRAINYARD_JOIN_SECRET" "$TRAINYARD_S3_ENDPOINT" "$TRAINYARD_S3_BUCKET" "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY"`, "-", file).Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	want := "lab\n198.18.0.1:7233\ntyj_abc.def\nhttp://198.18.0.1:9000\ntrainyard\nAK\ns e'c/r+t\n"
	if string(out) != want {
		t.Errorf("read back:\n%s\nwant:\n%s\nfile:\n%s", out, want, b.String())
	}

	for _, bad := range []string{filepath.Join(dir, "missing.json"), file} {
		if err := writeAgentEnv(&b, "lab", j, bad); err == nil || !strings.Contains(err.Error(), "--s3-credentials") {
			t.Errorf("keys file %s: err %v, want one naming --s3-credentials", bad, err)
		}
	}
}
