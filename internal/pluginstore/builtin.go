package pluginstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/trainyard/trainyard/internal/pluginhost"
)

// BuiltinIndex names the index of a built-in plugin set (plugins/builtin).
const BuiltinIndex = "index.json"

// BuiltinBy marks records registered from the binary's built-in set.
const BuiltinBy = "trainyard (built-in)"

// Builtin is one plugin the binary carries: its module, gzipped, is File.
type Builtin struct {
	ID       string              `json:"id"`
	File     string              `json:"file"`
	Metadata pluginhost.Metadata `json:"metadata"`
}

// Builtins reads the index of a built-in set; a set without one is empty
// (a binary built without make).
func Builtins(fsys fs.FS) ([]Builtin, error) {
	b, err := fs.ReadFile(fsys, BuiltinIndex)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("built-in plugins: %w", err)
	}
	var out []Builtin
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("built-in plugins: corrupt %s: %w", BuiltinIndex, err)
	}
	return out, nil
}

// Module reads the built-in's bytes, checked against its id.
func (b Builtin) Module(fsys fs.FS) ([]byte, error) {
	f, err := fsys.Open(b.File)
	if err != nil {
		return nil, fmt.Errorf("built-in plugin %s: %w", b.Metadata.Label(), err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("built-in plugin %s: %w", b.Metadata.Label(), err)
	}
	wasm, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("built-in plugin %s: %w", b.Metadata.Label(), err)
	}
	if got := pluginhost.SHA256(wasm); got != b.ID {
		return nil, fmt.Errorf("built-in plugin %s: bytes hash to %s, index says %s", b.Metadata.Label(), got, b.ID)
	}
	return wasm, nil
}

// FindBuiltin resolves a reference (sha256, name@version or name) among
// the built-ins, like Resolve does among stored plugins.
func FindBuiltin(set []Builtin, ref string) (Builtin, bool) {
	name, version, _ := strings.Cut(ref, "@")
	for _, b := range set {
		if b.ID == ref || (b.Metadata.Name == name && (version == "" || b.Metadata.Version == version)) {
			return b, true
		}
	}
	return Builtin{}, false
}

// BuiltinModule resolves a reference (sha256, name@version or name) among
// the built-in set in fsys and returns its module, checked against its id.
func BuiltinModule(fsys fs.FS, ref string) ([]byte, error) {
	set, err := Builtins(fsys)
	if err != nil {
		return nil, err
	}
	b, ok := FindBuiltin(set, ref)
	if !ok {
		return nil, fmt.Errorf("plugin %q: not a built-in one: %w", ref, ErrNotFound)
	}
	return b.Module(fsys)
}

// PackBuiltins turns modules (by file stem) into a built-in set: each
// gzipped, plus the index, by file name. Modules whose metadata the runtime
// rejects fail the build rather than the server's start.
func PackBuiltins(ctx context.Context, rt *pluginhost.Runtime, modules map[string][]byte) (map[string][]byte, error) {
	files := map[string][]byte{}
	var set []Builtin
	for stem, wasm := range modules {
		md, err := rt.Validate(ctx, wasm, pluginhost.Limits{})
		if err != nil {
			return nil, fmt.Errorf("built-in plugin %s: %w", stem, err)
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if _, err := zw.Write(wasm); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		b := Builtin{ID: pluginhost.SHA256(wasm), File: stem + ".wasm.gz", Metadata: md}
		files[b.File] = buf.Bytes()
		set = append(set, b)
	}
	slices.SortFunc(set, func(a, b Builtin) int { return strings.Compare(a.Metadata.Label(), b.Metadata.Label()) })
	idx, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		return nil, err
	}
	files[BuiltinIndex] = idx
	return files, nil
}

// SeedReport says what Seed did with each built-in.
type SeedReport struct {
	Added   []string // name@version stored now
	Present int      // the same bytes were stored already
	// Kept: a plugin of the same name@version with other bytes is stored
	// (a user's); it stays, and the built-in is not registered.
	Kept []string
}

// Seed registers the built-ins: idempotent by sha256, and never over a
// stored plugin of the same name@version.
func (s *Store) Seed(ctx context.Context, fsys fs.FS, set []Builtin) (SeedReport, error) {
	var rep SeedReport
	if len(set) == 0 {
		return rep, nil
	}
	stored, err := s.List(ctx)
	if err != nil {
		return rep, err
	}
	byLabel := map[string]string{}
	for _, r := range stored {
		byLabel[r.Name+"@"+r.Version] = r.ID
	}
	for _, b := range set {
		switch id, ok := byLabel[b.Metadata.Label()]; {
		case ok && id == b.ID:
			rep.Present++
			continue
		case ok:
			rep.Kept = append(rep.Kept, b.Metadata.Label())
			continue
		}
		wasm, err := b.Module(fsys)
		if err != nil {
			return rep, err
		}
		if _, err := s.Put(ctx, wasm, b.Metadata, BuiltinBy); err != nil {
			return rep, err
		}
		rep.Added = append(rep.Added, b.Metadata.Label())
	}
	return rep, nil
}
