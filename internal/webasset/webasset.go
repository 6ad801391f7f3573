// Package webasset serves files embedded in the binary to a browser: each
// asset under a URL versioned by its content hash (cached for good, so a
// new binary's assets are never mixed with an old page), and pages with a
// Content-Security-Policy that keeps them to what this server serves. The
// API reference at /docs and the dashboard at /ui use it, so both render
// in a lab without internet.
package webasset

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Asset is one embedded file, with the hash that versions its URL.
type Asset struct {
	Body      []byte
	Type      string // Content-Type
	Hash      string // hex sha256: its ETag; the first 16 digits are its URL's ?v=
	Integrity string // subresource integrity (sha384), for <script integrity=...>
}

// New hashes body.
func New(body []byte, contentType string) Asset {
	sum := sha256.Sum256(body)
	sri := sha512.Sum384(body)
	return Asset{Body: body, Type: contentType, Hash: hex.EncodeToString(sum[:]),
		Integrity: "sha384-" + base64.StdEncoding.EncodeToString(sri[:])}
}

// Set is a directory of assets served under one URL prefix, by name.
type Set struct {
	Prefix string // e.g. "/docs/assets/"
	files  map[string]Asset
}

// Load reads the named files of dir in fsys (name → Content-Type).
func Load(fsys fs.FS, dir, prefix string, types map[string]string) (*Set, error) {
	s := &Set{Prefix: prefix, files: map[string]Asset{}}
	for name, ctype := range types {
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("embedded asset %s: %w", name, err)
		}
		s.files[name] = New(b, ctype)
	}
	return s, nil
}

// MustLoad is Load for files go:embed guarantees.
func MustLoad(fsys fs.FS, dir, prefix string, types map[string]string) *Set {
	s, err := Load(fsys, dir, prefix, types)
	if err != nil {
		panic("webasset: " + err.Error())
	}
	return s
}

// Get returns the asset called name.
func (s *Set) Get(name string) (Asset, bool) {
	a, ok := s.files[name]
	return a, ok
}

// URL is name's versioned URL; it panics for a name not in the set (a
// page naming a file it does not embed is a bug caught by any test).
func (s *Set) URL(name string) string {
	a, ok := s.files[name]
	if !ok {
		panic("webasset: no asset " + name)
	}
	return s.Prefix + name + "?v=" + a.Hash[:16]
}

// Serve answers a GET of the asset called name, cached for good when the
// URL carries its current version; false when there is no such asset.
func (s *Set) Serve(w http.ResponseWriter, r *http.Request, name string) bool {
	a, ok := s.files[name]
	if !ok {
		return false
	}
	h := w.Header()
	h.Set("Content-Type", a.Type)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", `"`+a.Hash+`"`)
	if r.URL.Query().Get("v") == a.Hash[:16] {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.Body))
	return true
}

// CSP joins Content-Security-Policy directives.
func CSP(directives ...string) string { return strings.Join(directives, "; ") }

// ServePage answers a GET of an HTML page under policy csp, never cached
// (it names the current assets' versions).
func ServePage(w http.ResponseWriter, r *http.Request, csp string, page []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(page))
}
