package cliflags

import (
	"os"
	"path/filepath"
	"testing"
)

// The real command sources: what the deployment files are checked against.
func TestReadTrainyard(t *testing.T) {
	cmds, err := Read(filepath.Join("..", "..", "..", "cmd", "trainyard"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd         string
		flags, env  []string
		notFlags    []string
		notEnvNames []string
	}{
		{"agent",
			[]string{"cluster", "node", "gpus", "work-dir", "heartbeat-interval", "temporal-address", "temporal-namespace", "temporal-tls-ca", "config", "log-level", "s3-endpoint", "s3-bucket", "plugin-cache-dir"},
			[]string{"TRAINYARD_JOIN_SECRET", "TRAINYARD_CONFIG", "TRAINYARD_TEMPORAL_ADDRESS", "TRAINYARD_GPUS", "TRAINYARD_S3_BUCKET"},
			[]string{"control-plane", "listen", "tokens-file"},
			[]string{"TRAINYARD_CONTROL_PLANE", "TRAINYARD_TOKENS_FILE"}},
		{"server",
			[]string{"listen", "tokens-file", "admin-token-file", "temporal-address", "temporal-tls-cert", "s3-endpoint", "s3-bucket", "s3-region", "s3-insecure", "plugin-cache-dir", "log-format"},
			[]string{"TRAINYARD_LISTEN", "TRAINYARD_S3_ENDPOINT"},
			[]string{"agents-dir", "node"},
			[]string{"TRAINYARD_JOIN_SECRET"}},
		{"worker",
			[]string{"agents-dir", "agent-temporal-address", "temporal-address", "s3-bucket", "plugin-cache-dir"},
			[]string{"TRAINYARD_AGENTS_DIR"},
			[]string{"listen", "tokens-file"},
			nil},
	} {
		c, ok := cmds[tc.cmd]
		if !ok {
			t.Fatalf("command %q not found; have %v", tc.cmd, keys(cmds))
		}
		for _, f := range tc.flags {
			if !c.Accepts(f) {
				t.Errorf("%s: --%s not found; read %v", tc.cmd, f, Sorted(c.Flags))
			}
		}
		for _, f := range tc.notFlags {
			if c.Accepts(f) {
				t.Errorf("%s: --%s read as a flag, but the command has none", tc.cmd, f)
			}
		}
		for _, e := range tc.env {
			if !c.ReadsEnv(e) {
				t.Errorf("%s: %s not read; read %v", tc.cmd, e, Sorted(c.Env))
			}
		}
		for _, e := range tc.notEnvNames {
			if c.ReadsEnv(e) {
				t.Errorf("%s: %s read, but the command does not read it", tc.cmd, e)
			}
		}
	}
}

// A synthetic package pins down the reading rules.
func TestReadRules(t *testing.T) {
	dir := t.TempDir()
	src := `package main

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/attribute"
)

func newRoot() *cobra.Command {
	root := &cobra.Command{Use: "trainyard", PersistentPreRunE: func(*cobra.Command, []string) error { _ = os.Getenv("TRAINYARD_CONFIG"); return nil }}
	pf := root.PersistentFlags()
	pf.StringP("config", "c", "", "")
	root.AddCommand(newA(), newB())
	return root
}

func newA() *cobra.Command {
	var n int
	cmd := &cobra.Command{Use: "a [args]", RunE: runA}
	cmd.Flags().IntVarP(&n, "count", "n", 1, "")
	shared(cmd.Flags())
	return cmd
}

func newB() *cobra.Command {
	cmd := &cobra.Command{Use: "b"}
	f := cmd.Flags()
	f.Duration("every", 0, "")
	_ = attribute.String("not-a-flag", "")
	return cmd
}

func shared(fs *pflag.FlagSet) { var s string; fs.StringVar(&s, "shared-thing", "", "") }

func runA(*cobra.Command, []string) error { _, _ = os.LookupEnv("TRAINYARD_SECRET"); return nil }
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmds, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd, flag string
		want      bool
	}{
		{"a", "count", true},
		{"a", "shared-thing", true},
		{"a", "config", true},
		{"a", "every", false},
		{"b", "every", true},
		{"b", "not-a-flag", false},
		{"b", "count", false},
		{"trainyard", "config", true},
		{"trainyard", "count", false},
	} {
		if got := cmds[tc.cmd].Accepts(tc.flag); got != tc.want {
			t.Errorf("%s accepts --%s = %v, want %v", tc.cmd, tc.flag, got, tc.want)
		}
	}
	for _, tc := range []struct {
		cmd, env string
		want     bool
	}{
		{"a", "TRAINYARD_SECRET", true},
		{"a", "TRAINYARD_SHARED_THING", true},
		{"a", "TRAINYARD_CONFIG", true},
		{"b", "TRAINYARD_SECRET", false},
		{"b", "TRAINYARD_EVERY", true},
	} {
		if got := cmds[tc.cmd].ReadsEnv(tc.env); got != tc.want {
			t.Errorf("%s reads %s = %v, want %v", tc.cmd, tc.env, got, tc.want)
		}
	}
}

func keys(m map[string]Command) []string {
	s := map[string]bool{}
	for k := range m {
		s[k] = true
	}
	return Sorted(s)
}
