// Package builtin carries the plugins that ship with Trainyard (the
// examples under plugins/), as `make build` packed them into wasm/ (see
// mk/builtin.mk): gzipped modules and an index of their metadata. A binary
// built without make carries none.
package builtin

import (
	"embed"
	"io/fs"
)

//go:embed wasm
var files embed.FS

// FS holds index.json and the gzipped modules it names (no index: none built).
func FS() fs.FS {
	sub, err := fs.Sub(files, "wasm")
	if err != nil {
		panic(err) // "wasm" is a valid path; fs.Sub cannot fail on it
	}
	return sub
}
