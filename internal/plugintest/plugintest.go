// Package plugintest gives tests compiled plugin modules: Go plugins are
// built on demand (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared) into the
// gitignored .cache/ folder; AssemblyScript plugins come from `make plugins`.
// A missing toolchain piece fails the test with the command to run; it never
// skips silently.
package plugintest

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/pluginbuild"
)

// Module is the repository's Go module path.
const Module = "github.com/trainyard/trainyard"

var (
	mu    sync.Mutex
	built = map[string][]byte{}
)

// CacheDir is where tests keep wazero's compilation cache: outside the
// checkout, like Go's build cache, so a fresh clone does not compile every
// plugin again (under -race, wazero's compiler is what a cold run spends
// minutes on). TRAINYARD_WAZERO_CACHE overrides it.
func CacheDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("TRAINYARD_WAZERO_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(Root(t), ".cache", "wazero")
	}
	return filepath.Join(d, "trainyard", "wazero")
}

// Root returns the repository root (the directory of Trainyard's go.mod).
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		// The first line names the module exactly: sdk/go's go.mod
		// (module Module/sdk/go) is not the root's.
		if first, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte("\n")); err == nil && string(bytes.TrimSpace(first)) == "module "+Module {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("plugintest: no go.mod of %s above the working directory", Module)
		}
		dir = parent
	}
}

// BuildGo builds the Go plugin package pkg (relative to the repository root,
// e.g. "./plugins/cartpole") and returns the module bytes. Builds
// are memoized per process and incremental through Go's build cache.
func BuildGo(t testing.TB, pkg string) []byte {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if b, ok := built[pkg]; ok {
		return b
	}
	root := Root(t)
	outDir := filepath.Join(root, ".cache", "plugintest")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	name := strings.NewReplacer("/", "_", ".", "_").Replace(strings.TrimPrefix(filepath.ToSlash(pkg), "./"))
	// Build to a temp name and rename: test binaries of several packages may
	// build the same plugin at once.
	tmp, err := os.CreateTemp(outDir, name+".*.tmp")
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	start := time.Now()
	if err := pluginbuild.Go(context.Background(), "", root, pkg, tmp.Name()); err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	b, err := os.ReadFile(tmp.Name())
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(outDir, name+".wasm")); err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	t.Logf("plugintest: built %s (%d KiB) in %v", pkg, len(b)>>10, time.Since(start).Round(time.Millisecond))
	built[pkg] = b
	return b
}

// AssemblyScript returns the AssemblyScript plugin `name` built by
// `make plugins` (.cache/plugins/<name>.wasm). It fails when the module is
// missing or older than its sources (plugins/<name>, sdk/assemblyscript;
// the SDK's template project is built as "goleft").
func AssemblyScript(t testing.TB, name string) []byte {
	t.Helper()
	root := Root(t)
	path := filepath.Join(root, ".cache", "plugins", name+".wasm")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("plugintest: AssemblyScript plugin %s is not built (%v): run `make plugins`", name, err)
	}
	src := filepath.Join(root, "plugins", name)
	if name == "goleft" {
		src = filepath.Join(root, "sdk", "assemblyscript", "template")
	}
	for _, src := range []string{src, filepath.Join(root, "sdk", "assemblyscript", "assembly")} {
		if newer := newestFile(src); newer.After(st.ModTime()) {
			t.Fatalf("plugintest: %s is older than its sources in %s: run `make plugins`", path, src)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	return b
}

func newestFile(dir string) time.Time {
	var newest time.Time
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if info, err := d.Info(); err == nil && !d.IsDir() && info.ModTime().After(newest) {
			newest = info.ModTime()
		}
		return nil
	})
	return newest
}
