package pluginscaffold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInit: the files each language writes, and what Init refuses. The
// projects are built and run by internal/e2e's TestPluginInit.
func TestInit(t *testing.T) {
	dir := t.TempDir()
	goDir := filepath.Join(dir, "walk")
	if err := Init(goDir, "go"); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(goDir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"module walk\n", "require " + SDKModule + " v0.0.0\n", "replace " + SDKModule + " => ./" + GoSDKCopy + "\n"} {
		if !strings.Contains(string(mod), want) {
			t.Errorf("go.mod lacks %q:\n%s", want, mod)
		}
	}
	for _, f := range []string{"main.go", GoSDKCopy + "/go.mod", GoSDKCopy + "/plugin/plugin.go", GoSDKCopy + "/envs/cartpole/cartpole.go"} {
		if _, err := os.Stat(filepath.Join(goDir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	filepath.WalkDir(goDir, func(p string, d os.DirEntry, err error) error {
		if strings.HasSuffix(p, "_test.go") || d.Name() == "testdata" {
			t.Errorf("copied %s", p)
		}
		return nil
	})
	main, _ := os.ReadFile(filepath.Join(goDir, "main.go"))
	if !strings.Contains(string(main), `Name:            "walk"`) {
		t.Errorf("main.go does not name the plugin walk:\n%s", main)
	}

	asDir := filepath.Join(dir, "walk-as")
	if err := Init(asDir, "as"); err != nil {
		t.Fatal(err)
	}
	idx, _ := os.ReadFile(filepath.Join(asDir, "assembly", "index.ts"))
	if !strings.Contains(string(idx), `"name":"walk-as"`) || !strings.Contains(string(idx), `from "../third_party/trainyard-sdk-as/assembly/index"`) {
		t.Errorf("assembly/index.ts:\n%s", idx)
	}
	for _, f := range []string{"package.json", "package-lock.json", "third_party/trainyard-sdk-as/assembly/index.ts", "third_party/trainyard-sdk-as/assembly/exports.ts"} {
		if _, err := os.Stat(filepath.Join(asDir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}

	for _, tc := range []struct{ dir, lang, want string }{
		{filepath.Join(dir, "x"), "rust", `unknown language "rust"`},
		{goDir, "go", "exists and is not empty"},
		{filepath.Join(dir, "Walk"), "go", `plugin name "Walk"`},
	} {
		if err := Init(tc.dir, tc.lang); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Init(%s, %s) = %v, want one line with %q", tc.dir, tc.lang, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("a refused Init created its directory")
	}
}
