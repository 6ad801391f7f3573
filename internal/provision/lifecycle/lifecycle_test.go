package lifecycle

import (
	"context"
	"os/exec"
	"strings"
	"testing"
)

func shEcho(t *testing.T, s string) string {
	t.Helper()
	out, err := exec.Command("/bin/sh", "-c", "printf %s "+Quote(s)).Output()
	if err != nil {
		t.Fatalf("sh with %q: %v", Quote(s), err)
	}
	return string(out)
}

func TestQuote(t *testing.T) {
	for _, s := range []string{"", "plain", "it's", "'", "''", `a"b`, "$HOME", "`id`", "a b\tc\nd", `\`, "-n", "*", "~/x", "$(reboot)"} {
		if got := shEcho(t, s); got != s {
			t.Errorf("Quote(%q) through sh gave %q", s, got)
		}
	}
}

// FuzzQuote: whatever the string (a secret, an argument), sh reads back
// exactly it: no expansion, no injection.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"it's", "$(id)", "a\nb", "'\\''"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0) {
			t.Skip("argv cannot hold NUL")
		}
		if got := shEcho(t, s); got != s {
			t.Fatalf("Quote(%q) through sh gave %q", s, got)
		}
	})
}

func TestLauncherRejects(t *testing.T) {
	tests := []struct {
		name string
		a    Agent
		err  string
	}{
		{name: "reserved variable", a: Agent{Binary: "x", Env: map[string]string{EnvAgentDir: "/"}}, err: "set by the provisioner"},
		{name: "bad variable name", a: Agent{Binary: "x", Env: map[string]string{"A B": "1"}}, err: "variable name"},
		{name: "bad inherited name", a: Agent{Binary: "x", Inherit: []string{"PATH; rm -rf /"}}, err: "inherited variable name"},
		{name: "NUL in value", a: Agent{Binary: "x", Env: map[string]string{"A": "\x00"}}, err: "NUL"},
		{name: "NUL in argument", a: Agent{Binary: "x", Args: []string{"\x00"}}, err: "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Launch(context.Background(), Shell{}, Agent{Dir: t.TempDir(), Binary: tt.a.Binary, Env: tt.a.Env, Inherit: tt.a.Inherit, Args: tt.a.Args})
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Launch error = %v, want %q", err, tt.err)
			}
		})
	}
}

// A directory that does not exist has no agent, and asking does not create it.
func TestStatusMissingDir(t *testing.T) {
	dir := t.TempDir() + "/nope"
	st, err := Status(context.Background(), Shell{}, dir, "")
	if err != nil || st.Alive || st.Dir != "" {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	if err := Stop(context.Background(), Shell{}, dir, 0); err != nil {
		t.Fatal(err)
	}
	if exec.Command("test", "-e", dir).Run() == nil {
		t.Fatal("Status or Stop created the directory")
	}
}
