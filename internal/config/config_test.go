package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestPrecedenceFlagThenEnvThenFileThenDefault(t *testing.T) {
	file := filepath.Join(t.TempDir(), "trainyard.yaml")
	os.WriteFile(file, []byte("temporal-address: file:7233\nnamespace: from-file\ns3-bucket: file-bucket\npoll: 3s\ntags: [a, b]\n"), 0o644)
	env := map[string]string{
		"TRAINYARD_NAMESPACE": "from-env",
		"TRAINYARD_S3_BUCKET": "env-bucket",
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	addr := fs.String("temporal-address", "default:7233", "")
	ns := fs.String("namespace", "default", "")
	bucket := fs.String("s3-bucket", "trainyard", "")
	poll := fs.Duration("poll", time.Second, "")
	tags := fs.StringSlice("tags", nil, "")
	untouched := fs.String("untouched", "keep", "")
	if err := fs.Parse([]string{"--s3-bucket=flag-bucket"}); err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := Apply(fs, file, lookup); err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"flag beats env and file", *bucket, "flag-bucket"},
		{"env beats file", *ns, "from-env"},
		{"file beats default", *addr, "file:7233"},
		{"default when unset", *untouched, "keep"},
		{"duration from file", poll.String(), "3s"},
		{"list from file", strings.Join(*tags, ","), "a,b"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"unknown key", "temporal-adress: x\n", nil, "unknown setting(s) temporal-adress"},
		{"bad duration in file", "poll: soon\n", nil, "poll"},
		{"bad duration in env", "", map[string]string{"TRAINYARD_POLL": "later"}, "TRAINYARD_POLL"},
		{"not yaml", "a: [b\n", nil, "config file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
			os.WriteFile(file, []byte(tc.yaml), 0o644)
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			fs.String("temporal-address", "", "")
			fs.Duration("poll", time.Second, "")
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			err := Apply(fs, file, lookup)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
}
