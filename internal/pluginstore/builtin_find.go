package pluginstore

import (
	"fmt"
	"io/fs"
)

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
