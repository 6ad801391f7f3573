package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Capabilities (docs/plugin-abi.md §9). A plugin gets nothing beyond the
// WASI sandbox unless three parties agree: the plugin declares what it
// wants in its metadata ("http:<endpoint>"), the run spec grants it
// (capabilities: {http: [endpoint, ...]}), and the admission policy accepts
// the grant (an endpoint must be declared for the run's cluster). The host
// then instantiates the capability's host functions for that module only.

// HostModule is the import module of Trainyard's capability host functions.
const HostModule = "trainyard"

// CapHTTP is the capability of HTTP requests to granted inference endpoints.
const CapHTTP = "http"

// ErrNotGranted marks a plugin that imports a capability the run did not
// grant, or calls an endpoint outside the allow-list.
var ErrNotGranted = errors.New("capability not granted")

// capabilityImports maps a host function import to its capability.
var capabilityImports = map[string]string{
	HostModule + ".http_request": CapHTTP,
}

// notGranted is checkImports' error for an import of a known capability.
func notGranted(mod, name string) error {
	capName, ok := capabilityImports[mod+"."+name]
	if !ok {
		return nil
	}
	return fmt.Errorf("%w: %w: %s.%s needs capability %q; the run must grant it (run spec capabilities: {%s: [endpoint, ...]}) and the plugin declare it (metadata capabilities: [\"%s:<endpoint>\"])",
		ErrUnknownImport, ErrNotGranted, mod, name, capName, capName, capName)
}

// Grants are the capabilities a run grants to the plugins it loads. The
// zero value grants nothing.
type Grants struct {
	HTTP *HTTPGrant
}

// LoadGranted is Load with capabilities: it instantiates the host functions
// of each granted capability and, once the plugin's metadata is known,
// restricts them to what the metadata declares (allowed = declared ∩
// granted). A plugin importing a capability that is not granted fails with
// ErrNotGranted (and ErrInvalidPlugin).
func (r *Runtime) LoadGranted(ctx context.Context, wasm []byte, opts LoadOptions, g Grants) (*Module, error) {
	var b *httpBinding
	if g.HTTP != nil {
		b = &httpBinding{grant: g.HTTP, logs: map[any]*exchangeLog{}}
		opts.HostFuncs = append(slices.Clone(opts.HostFuncs), b.hostFunc())
	}
	m, err := r.Load(ctx, wasm, opts)
	if err != nil {
		return nil, err
	}
	if b != nil {
		if m.importsCapability() && len(m.meta.DeclaredEndpoints(CapHTTP)) == 0 {
			_ = m.Close(ctx)
			return nil, invalid(m.label, fmt.Errorf("%w: it imports %s.http_request but its metadata declares no \"http:<endpoint>\" capability", ErrMetadata, HostModule))
		}
		b.bind(m.meta)
		m.caps = b
	}
	return m, nil
}

// validationGrants grant every capability with nothing behind it: calls
// are refused, so validation can load a plugin that uses one.
func validationGrants() Grants {
	return Grants{HTTP: NewHTTPGrant("validate", nil, HTTPLimits{})}
}

// importsCapability reports whether the module imports a capability's
// host function.
func (m *Module) importsCapability() bool {
	for _, f := range m.compiled.ImportedFunctions() {
		mod, name, _ := f.Import()
		if _, ok := capabilityImports[mod+"."+name]; ok {
			return true
		}
	}
	return false
}

// smokeWithoutCapabilities checks what runs without the capability: an env
// inits and resets (its steps call the endpoint and are first exercised in
// a run); reward and game plugins are only loaded.
func (m *Module) smokeWithoutCapabilities(ctx context.Context) error {
	if m.meta.Kind != KindEnv {
		return nil
	}
	n := m.meta.Slots(2)
	v, err := m.NewVecEnv(ctx, n, 1)
	if err != nil {
		return err
	}
	defer v.Close()
	obs := make([]float32, n*v.od)
	if err := v.Reset(1, obs); err != nil {
		return err
	}
	return finite("reset", m.label, obs)
}

// DeclaredEndpoints lists the endpoints a plugin's metadata declares for a
// capability ("http:llm" → "llm").
func (m Metadata) DeclaredEndpoints(capability string) []string {
	var out []string
	for _, c := range m.Capabilities {
		if name, ok := strings.CutPrefix(c, capability+":"); ok && name != "" {
			out = append(out, name)
		}
	}
	return out
}

// callSlot lets a host function find the deadline of the ABI call it runs
// in: the watchdog's per-instance context carries it (watchdog.register).
type callSlot struct {
	w *watchdog
	d *deadlined
}

type callSlotKey struct{}

// callContext derives a context that ends at the current ABI call's
// deadline or after limit, whichever is first; callBound says it is the
// call's. The watchdog also cancels the parent when the call overruns, so a
// host function blocked in I/O returns at the deadline.
func callContext(ctx context.Context, limit time.Duration) (_ context.Context, _ context.CancelFunc, callBound bool) {
	dl := time.Now().Add(limit)
	if s, ok := ctx.Value(callSlotKey{}).(callSlot); ok {
		if v := s.d.deadline.Load(); v > 0 {
			if at := s.w.base.Add(time.Duration(v)); at.Before(dl) {
				dl, callBound = at, true
			}
		}
	} else if at, ok := ctx.Deadline(); ok && at.Before(dl) {
		dl, callBound = at, true
	}
	c, cancel := context.WithDeadline(ctx, dl)
	return c, cancel, callBound
}

// trapDeadline ends the ABI call from inside a host function whose call ran
// out of time: wazero turns the panic into the call's error, which the host
// classifies as ErrTimeout (the guest never resumes).
func trapDeadline(what string) {
	panic(fmt.Errorf("%w: %s blocked past the call's deadline", context.DeadlineExceeded, what))
}
