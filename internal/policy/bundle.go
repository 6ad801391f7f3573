// Package policy admits work with the Rego policies in policies/: it loads a
// bundle (modules + data), prepares the admission query once, and decides
// on pre-aggregated input. It also runs a bundle's Rego unit tests and
// dry-runs a proposed bundle against current items.
package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// Bundle is a policy bundle: Rego modules by path (tests included, named
// *_test.rego) and the data document. It is plain JSON, so the API can take
// a proposed bundle in a request body.
type Bundle struct {
	Modules map[string]string `json:"modules"`
	Data    map[string]any    `json:"data"`
}

// LoadDir loads a bundle from a directory laid out like policies/.
func LoadDir(dir string) (Bundle, error) {
	b, err := LoadFS(os.DirFS(dir))
	if err != nil {
		return Bundle{}, fmt.Errorf("load policy dir %s: %w", dir, err)
	}
	return b, nil
}

// LoadFS loads *.rego modules and data.json documents; like `opa test`, a
// data.json in a sub-directory lands under that directory's path.
func LoadFS(fsys fs.FS) (Bundle, error) {
	b := Bundle{Modules: map[string]string{}, Data: map[string]any{}}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch {
		case strings.HasSuffix(p, ".rego"):
			src, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			b.Modules[p] = string(src)
		case path.Base(p) == "data.json":
			raw, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			var doc map[string]any
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&doc); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if err := mergeAt(b.Data, strings.Split(path.Dir(p), "/"), doc); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	})
	if err != nil {
		return Bundle{}, fmt.Errorf("load policy bundle: %w", err)
	}
	if len(b.Modules) == 0 {
		return Bundle{}, fmt.Errorf("load policy bundle: no .rego modules")
	}
	return b, nil
}

func mergeAt(dst map[string]any, dir []string, doc map[string]any) error {
	for _, seg := range dir {
		if seg == "." || seg == "" {
			continue
		}
		next, ok := dst[seg].(map[string]any)
		if !ok {
			if _, taken := dst[seg]; taken {
				return fmt.Errorf("data key %s is not an object", seg)
			}
			next = map[string]any{}
			dst[seg] = next
		}
		dst = next
	}
	return mergeObjects(dst, doc)
}

func mergeObjects(dst, src map[string]any) error {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				if err := mergeObjects(dv, sv); err != nil {
					return err
				}
				continue
			}
		}
		if _, clash := dst[k]; clash {
			return fmt.Errorf("data key %s is defined twice", k)
		}
		dst[k] = v
	}
	return nil
}

// Revision is a content hash of the bundle: sorted module paths and
// sources, then canonical data JSON. Decisions carry it.
func (b Bundle) Revision() string {
	h := sha256.New()
	paths := make([]string, 0, len(b.Modules))
	for p := range b.Modules {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(h, "%d:%s\n%d:%s\n", len(p), p, len(b.Modules[p]), b.Modules[p])
	}
	data, _ := json.Marshal(b.Data) // map keys marshal sorted: canonical
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// IsTest says whether a module path is a Rego test file.
func IsTest(p string) bool { return strings.HasSuffix(p, "_test.rego") }
