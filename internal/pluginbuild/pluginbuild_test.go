package pluginbuild_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/pluginbuild"
	"github.com/trainyard/trainyard/internal/plugintest"
)

func TestBuild(t *testing.T) {
	root := plugintest.Root(t)
	ctx := context.Background()
	dir := t.TempDir()
	tests := []struct {
		name  string
		build func(out string) error
		fail  string // substring of the error; "" = must succeed
	}{
		{"go", func(out string) error { return pluginbuild.Go(ctx, "", root, "./plugins/tictactoe", out) }, ""},
		{"go compile error", func(out string) error { return pluginbuild.Go(ctx, "", root, "./plugins/no/such/dir", out) }, "no/such/dir"},
		{"assemblyscript", func(out string) error {
			return pluginbuild.AssemblyScript(ctx, filepath.Join(root, "sdk", "assemblyscript"), filepath.Join(root, "sdk", "assemblyscript", "template", "assembly", "index.ts"), out)
		}, ""},
		{"assemblyscript without npm ci", func(out string) error {
			return pluginbuild.AssemblyScript(ctx, dir, "x.ts", out)
		}, "make plugins"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, string(rune('a'+i))+".wasm")
			err := tc.build(out)
			if tc.fail != "" {
				if err == nil || !strings.Contains(err.Error(), tc.fail) {
					t.Fatalf("error = %v, want one mentioning %q", err, tc.fail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(out)
			if err != nil || !bytes.HasPrefix(b, []byte("\x00asm")) {
				t.Fatalf("output is not WASM (%v)", err)
			}
		})
	}
}
