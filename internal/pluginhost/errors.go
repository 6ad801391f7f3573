package pluginhost

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns wraps one of them, so an
// API layer can map them with errors.Is (ErrInvalidPlugin → 422).
var (
	// ErrInvalidPlugin marks a module rejected by Load or Validate. It is
	// always combined with a more specific sentinel below.
	ErrInvalidPlugin = errors.New("invalid plugin")

	ErrNotWasm       = errors.New("not a WebAssembly module")
	ErrCompile       = errors.New("compile failed")
	ErrUnknownImport = errors.New("imports a host function that is not granted")
	ErrMissingExport = errors.New("missing export")
	ErrABIVersion    = errors.New("unsupported ABI version")
	ErrMetadata      = errors.New("bad metadata")

	// Failures of a call into a plugin instance. After any of these but
	// ErrBadInput the instance is discarded, never reused.
	ErrTimeout     = errors.New("deadline exceeded")
	ErrOutOfMemory = errors.New("out of memory")
	ErrTrap        = errors.New("trapped")
	ErrGuestFault  = errors.New("plugin reported a fault")
	ErrBadInput    = errors.New("plugin rejected its input")
	ErrProtocol    = errors.New("ABI protocol violation")

	// ErrClosed is returned by calls on a closed runtime, module or env.
	ErrClosed = errors.New("closed")
)

// CallError says which plugin, which call and why. Err wraps a sentinel.
type CallError struct {
	Plugin string // "name@version (sha256 prefix)" or the sha256 prefix before metadata is known
	Call   string // ABI export, or "instantiate"
	Err    error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("plugin %s: %s: %v", e.Plugin, e.Call, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// invalid marks err as a validation failure of the plugin with the given label.
func invalid(plugin string, err error) error {
	return fmt.Errorf("%w: %w", ErrInvalidPlugin, &CallError{Plugin: plugin, Call: "validate", Err: err})
}
