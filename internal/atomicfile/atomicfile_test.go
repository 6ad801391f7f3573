package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "sub", "x.json")
	for _, content := range []string{"first", "second, longer"} {
		if err := Write(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(f)
		if string(got) != content {
			t.Fatalf("got %q, want %q", got, content)
		}
	}
	if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(f))
	if len(entries) != 1 {
		t.Fatalf("temp files left behind: %v", entries)
	}
}
