package pluginhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// HostFunc is a host function a plugin may import. Nothing is ambient: a
// plugin can only import WASI (sandboxed: no files, env, clock or network)
// and the HostFuncs passed to its Load, which is where per-run capabilities
// (e.g. an allow-listed HTTP client) are granted.
type HostFunc struct {
	Module, Name    string
	Params, Results []api.ValueType
	Fn              api.GoModuleFunction
}

// LoadOptions configure one loaded module.
type LoadOptions struct {
	Limits    Limits
	HostFuncs []HostFunc
}

// Module is a compiled plugin: compile once, instantiate many.
type Module struct {
	rt       *Runtime
	wr       wazero.Runtime
	compiled wazero.CompiledModule
	limits   Limits
	sha      string
	meta     Metadata
	label    string
	hasInit  bool // exports _initialize (Go c-shared)
	// instrumented: compiled from instrument's rewrite (interrupted through
	// its global); otherwise with wazero's checks unless noInterrupt.
	instrumented bool
	wasm         []byte
	granted      int          // host functions granted at Load
	caps         *httpBinding // the http capability, when granted (capability_http.go)

	pool chan *instance

	mu     sync.Mutex
	closed bool
}

// ABI exports by kind.
var (
	commonExports = []string{"abi_version", "metadata", "alloc", "last_error", "init"}
	kindExports   = map[Kind][]string{
		KindEnv:    {"reset", "step_batch"},
		KindReward: {"reward_batch"},
		KindGame:   {"game_reset", "game_to_move", "game_legal", "game_apply", "game_outcome", "game_save", "game_restore", "game_observe"},
	}
)

// wasmMagic is "\0asm" followed by binary format version 1.
var wasmMagic = []byte{0, 'a', 's', 'm', 1, 0, 0, 0}

// load is Load (telemetry.go) without its span.
func (r *Runtime) load(ctx context.Context, wasm []byte, opts LoadOptions) (*Module, error) {
	l := opts.Limits.withDefaults()
	sha := SHA256(wasm)
	m := &Module{rt: r, limits: l, sha: sha, label: "sha256:" + sha[:12], pool: make(chan *instance, l.PoolSize)}
	if !bytes.HasPrefix(wasm, wasmMagic) {
		return nil, invalid(m.label, fmt.Errorf("%w: the first bytes are %q", ErrNotWasm, head(wasm, 8)))
	}
	if err := precheck(wasm); err != nil {
		return nil, invalid(m.label, err)
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("load plugin %s: runtime %w", m.label, ErrClosed)
	}

	m.wasm, m.granted = wasm, len(opts.HostFuncs)
	code := wasm
	if r.cfg.instrumented() {
		if iw, err := instrument(wasm); err == nil {
			code, m.instrumented = iw, true
		}
	}
	ok := false
	defer func() {
		if !ok && m.wr != nil {
			_ = m.wr.Close(ctx)
		}
	}()
	granted, err := m.compile(ctx, code, opts.HostFuncs)
	if err != nil && m.instrumented {
		// A rewriting this package got wrong must not reject a module
		// wazero accepts: fall back to wazero's own checks.
		_ = m.wr.Close(ctx)
		m.instrumented = false
		granted, err = m.compile(ctx, wasm, opts.HostFuncs)
	}
	if err != nil {
		return nil, err
	}
	if err := m.checkImports(granted); err != nil {
		return nil, invalid(m.label, err)
	}
	exports := m.compiled.ExportedFunctions()
	if err := checkExports(exports, commonExports); err != nil {
		return nil, invalid(m.label, err)
	}
	if _, ok := m.compiled.ExportedMemories()["memory"]; !ok {
		return nil, invalid(m.label, fmt.Errorf("%w: memory \"memory\"", ErrMissingExport))
	}
	_, m.hasInit = exports["_initialize"]

	in, err := m.newInstance(ctx)
	if err != nil {
		return nil, invalid(m.label, err)
	}
	meta, err := in.readMetadata(ctx)
	if err != nil {
		in.close()
		return nil, invalid(m.label, err)
	}
	m.meta, m.label = meta, meta.Label()+" ("+m.label+")"
	in.label = m.label
	if err := checkExports(exports, kindExports[meta.Kind]); err != nil {
		in.close()
		return nil, invalid(m.label, err)
	}
	m.release(in)

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, fmt.Errorf("load plugin %s: runtime %w", m.label, ErrClosed)
	}
	r.modules[m] = struct{}{}
	r.mu.Unlock()
	ok = true
	return m, nil
}

// compile creates the module's wazero runtime with the sandbox's host
// modules and compiles code in it.
func (m *Module) compile(ctx context.Context, code []byte, funcs []HostFunc) (map[string]bool, error) {
	cfg := wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(m.rt.cache).
		WithMemoryLimitPages(m.limits.MemoryPages).
		WithCloseOnContextDone(!m.rt.cfg.noInterrupt && !m.instrumented)
	m.wr = wazero.NewRuntimeWithConfig(ctx, cfg)
	granted, err := m.instantiateHost(ctx, funcs)
	if err != nil {
		return nil, fmt.Errorf("load plugin %s: %w", m.label, err)
	}
	m.compiled, err = m.wr.CompileModule(ctx, code)
	if err != nil {
		return nil, invalid(m.label, fmt.Errorf("%w: %v", ErrCompile, err))
	}
	return granted, nil
}

func head(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// instantiateHost defines the WASI sandbox and the granted host functions.
func (m *Module) instantiateHost(ctx context.Context, funcs []HostFunc) (map[string]bool, error) {
	granted := map[string]bool{}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, m.wr); err != nil {
		return nil, fmt.Errorf("instantiate WASI: %w", err)
	}
	byModule := map[string][]HostFunc{}
	var order []string
	for _, f := range funcs {
		if f.Module == wasi_snapshot_preview1.ModuleName {
			return nil, fmt.Errorf("host function %s.%s: the WASI module cannot be extended", f.Module, f.Name)
		}
		if _, ok := byModule[f.Module]; !ok {
			order = append(order, f.Module)
		}
		byModule[f.Module] = append(byModule[f.Module], f)
	}
	for _, name := range order {
		b := m.wr.NewHostModuleBuilder(name)
		for _, f := range byModule[name] {
			b.NewFunctionBuilder().WithGoModuleFunction(f.Fn, f.Params, f.Results).Export(f.Name)
			granted[name+"."+f.Name] = true
		}
		if _, err := b.Instantiate(ctx); err != nil {
			return nil, fmt.Errorf("instantiate host module %s: %w", name, err)
		}
	}
	return granted, nil
}

func (m *Module) checkImports(granted map[string]bool) error {
	for _, f := range m.compiled.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod == wasi_snapshot_preview1.ModuleName || granted[mod+"."+name] {
			continue
		}
		if err := notGranted(mod, name); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s.%s", ErrUnknownImport, mod, name)
	}
	if mems := m.compiled.ImportedMemories(); len(mems) > 0 {
		mod, name, _ := mems[0].Import()
		return fmt.Errorf("%w: memory %s.%s (a plugin must define its own memory)", ErrUnknownImport, mod, name)
	}
	return nil
}

func checkExports(have map[string]api.FunctionDefinition, want []string) error {
	var missing []string
	for _, name := range want {
		if _, ok := have[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %v", ErrMissingExport, missing)
	}
	return nil
}

// Metadata is what the plugin declared.
func (m *Module) Metadata() Metadata { return m.meta }

// SHA256 is the hex sha256 of the module bytes.
func (m *Module) SHA256() string { return m.sha }

// Limits are the effective limits of the module.
func (m *Module) Limits() Limits { return m.limits }

// acquire takes an idle instance or instantiates a fresh one.
func (m *Module) acquire(ctx context.Context) (*instance, error) {
	select {
	case in := <-m.pool:
		return in, nil
	default:
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("plugin %s: module %w", m.label, ErrClosed)
	}
	return m.newInstance(ctx)
}

// release returns a healthy instance to the pool; broken ones are closed.
func (m *Module) release(in *instance) {
	if in.broken {
		in.close()
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		in.close()
		return
	}
	select {
	case m.pool <- in:
	default:
		in.close()
	}
}

// Close closes idle instances and the module's runtime. Instances still held
// by VecEnvs or Games fail their next call with ErrClosed.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	for {
		select {
		case in := <-m.pool:
			in.close()
			continue
		default:
		}
		break
	}
	m.rt.mu.Lock()
	delete(m.rt.modules, m)
	m.rt.mu.Unlock()
	if err := m.wr.Close(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close plugin %s: %w", m.label, err)
	}
	return nil
}
