package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginInit: `plugin init` for Go and AssemblyScript in a directory
// outside the repository, then `plugin build` and `plugin run` there, as a
// plugin author would. The Go project builds with the module proxy off
// (the SDK comes with it) and its module graph is small; a bad language or
// a non-empty directory is one error line and a non-zero exit.
func TestPluginInit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if repo, _ := filepath.Abs("../.."); strings.HasPrefix(dir, repo+string(filepath.Separator)) {
		t.Fatalf("temp dir %s lies inside the repository %s", dir, repo)
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	trainyard := func(t *testing.T, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(binary, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := trainyard(t, args...)
		if err != nil {
			t.Fatalf("trainyard %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	for _, tc := range []struct{ lang, name string }{{"go", "walk-go"}, {"assemblyscript", "walk-as"}} {
		t.Run(tc.lang, func(t *testing.T) {
			must(t, "plugin", "init", tc.name, "--lang", tc.lang)
			if tc.lang == "go" {
				cmd := exec.Command("go", "list", "-m", "all")
				cmd.Dir, cmd.Env = filepath.Join(dir, tc.name), env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("go list -m all: %v\n%s", err, out)
				}
				if mods := strings.Split(strings.TrimSpace(string(out)), "\n"); len(mods) > 5 {
					t.Fatalf("go list -m all: %d modules, want at most 5:\n%s", len(mods), out)
				}
				t.Logf("go list -m all:\n%s", out)
			}
			built := strings.TrimSpace(must(t, "plugin", "build", tc.name))
			if want := filepath.Join(dir, tc.name+".wasm"); built != want {
				t.Fatalf("plugin build printed %q, want %q", built, want)
			}
			out := must(t, "plugin", "run", tc.name+".wasm", "--steps", "2000", "--envs", "4")
			if !strings.Contains(out, tc.name+"@0.1.0") || !strings.Contains(out, "steps/s") {
				t.Fatalf("plugin run: %s", out)
			}
		})
	}
	for _, args := range [][]string{
		{"plugin", "init", "walk-rs", "--lang", "rust"},
		{"plugin", "init", "walk-go"}, // exists, not empty
	} {
		out, err := trainyard(t, args...)
		if err == nil || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("trainyard %s: want one error line and a non-zero exit, got %v: %s", strings.Join(args, " "), err, out)
		}
	}
}
