// Command builtinplugins packs compiled plugins into the set the binary
// embeds (plugins/builtin): `make build` runs it (mk/builtin.mk).
//
//	go run ./internal/tools/builtinplugins -out plugins/builtin/wasm a.wasm b.wasm ...
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/trainyard/trainyard/internal/atomicfile"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
)

func main() {
	out := flag.String("out", "plugins/builtin/wasm", "directory the binary embeds")
	cache := flag.String("cache", filepath.Join(".cache", "wazero"), "compilation cache")
	flag.Parse()
	if err := run(*out, *cache, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "builtinplugins:", err)
		os.Exit(1)
	}
}

func run(out, cache string, paths []string) error {
	ctx := context.Background()
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: cache})
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	modules := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		modules[strings.TrimSuffix(filepath.Base(p), ".wasm")] = b
	}
	files, err := pluginstore.PackBuiltins(ctx, rt, modules)
	if err != nil {
		return err
	}
	// Stale modules go first; the index is written last, so an interrupted
	// pack never names a file that is not there.
	old, _ := filepath.Glob(filepath.Join(out, "*.wasm.gz"))
	for _, f := range old {
		if _, keep := files[filepath.Base(f)]; !keep {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for name, b := range files {
		if name == pluginstore.BuiltinIndex {
			continue
		}
		if err := atomicfile.Write(filepath.Join(out, name), b, 0o644); err != nil {
			return err
		}
	}
	if err := atomicfile.Write(filepath.Join(out, pluginstore.BuiltinIndex), files[pluginstore.BuiltinIndex], 0o644); err != nil {
		return err
	}
	fmt.Printf("built-in plugins: %d packed into %s\n", len(modules), out)
	return nil
}
