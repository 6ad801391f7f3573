package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// Guest status codes (docs/plugin-abi.md).
const (
	statusOK       = 0
	statusBadInput = 1
	statusFault    = 2
)

// fn indexes the ABI exports an instance resolves once.
type fn int

const (
	fnABIVersion fn = iota
	fnMetadata
	fnAlloc
	fnLastError
	fnInit
	fnReset
	fnStepBatch
	fnRewardBatch
	fnGameReset
	fnGameToMove
	fnGameLegal
	fnGameApply
	fnGameOutcome
	fnGameSave
	fnGameRestore
	fnGameObserve
	fnFree
	fnEnvSave
	fnEnvRestore
	numFns
)

var fnNames = [numFns]string{"abi_version", "metadata", "alloc", "last_error", "init", "reset", "step_batch",
	"reward_batch", "game_reset", "game_to_move", "game_legal", "game_apply", "game_outcome", "game_save",
	"game_restore", "game_observe", "free", "env_save", "env_restore"}

// instance is one sandboxed instantiation. It is used by one goroutine at a
// time; once broken it is closed and never reused.
type instance struct {
	m       *Module
	label   string
	mod     api.Module
	mem     api.Memory
	fns     [numFns]api.Function
	stack   [16]uint64
	stderr  *tailWriter
	dl      *deadlined
	broken  bool
	reward  *rewardBufs // reward plugins: buffers of this instance
	envBufs *envBufs    // env plugins: batch buffers of this instance
}

// tailWriter keeps the last max bytes the guest wrote to stderr, for errors.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

func (m *Module) newInstance(ctx context.Context) (*instance, error) {
	in := &instance{m: m, label: m.label, stderr: &tailWriter{max: m.limits.MaxStderrBytes}}
	// The sandbox: no args, env, filesystem or network; fake clocks and a
	// fixed random source (wazero's defaults) keep runs deterministic.
	cfg := wazero.NewModuleConfig().WithName("").WithStderr(in.stderr).WithStartFunctions()
	select {
	case m.rt.inits <- struct{}{}:
		defer func() { <-m.rt.inits }()
	case <-ctx.Done():
		return nil, &CallError{Plugin: m.label, Call: "instantiate", Err: ctx.Err()}
	}
	start := time.Now()
	ictx, cancel := context.WithTimeout(ctx, m.limits.InitTimeout)
	defer cancel()
	mod, err := m.wr.InstantiateModule(ictx, m.compiled, cfg)
	if err != nil {
		return nil, in.classify("instantiate", err, time.Since(start), m.limits.InitTimeout)
	}
	in.mod, in.mem = mod, mod.Memory()
	if in.mem == nil {
		_ = mod.Close(ctx)
		return nil, &CallError{Plugin: m.label, Call: "instantiate", Err: fmt.Errorf("%w: memory", ErrMissingExport)}
	}
	var stop api.MutableGlobal
	if m.instrumented {
		g, ok := mod.ExportedGlobal(interruptGlobal).(api.MutableGlobal)
		if !ok {
			_ = mod.Close(ctx)
			return nil, &CallError{Plugin: m.label, Call: "instantiate", Err: fmt.Errorf("%w: instrumented module lacks %s", ErrProtocol, interruptGlobal)}
		}
		stop = g
	}
	for i, name := range fnNames {
		in.fns[i] = mod.ExportedFunction(name)
	}
	in.dl = m.rt.wd.register(stop)
	// The start function (moved out of instantiation by instrument) and Go's
	// c-shared runtime initialization run under the watchdog.
	for _, name := range []string{startExport, "_initialize"} {
		if name == startExport && (!m.instrumented || mod.ExportedFunction(startExport) == nil) || name == "_initialize" && !m.hasInit {
			continue
		}
		if err := in.callInit(ictx, name); err != nil {
			call := name
			if name == startExport {
				call = "start"
			}
			err = in.classify(call, err, time.Since(start), m.limits.InitTimeout)
			in.close()
			return nil, err
		}
	}
	return in, nil
}

// callInit calls an export with no parameters under the init deadline.
func (in *instance) callInit(ctx context.Context, name string) error {
	f := in.mod.ExportedFunction(name)
	if f == nil {
		return fmt.Errorf("%w: %s", ErrMissingExport, name)
	}
	if in.m.rt.cfg.ctxDeadline || !in.m.instrumented {
		_, err := f.Call(ctx) // ctx carries the init timeout; wazero's checks or none
		return err
	}
	wd := in.m.rt.wd
	wd.arm(in.dl, in.m.limits.InitTimeout)
	_, err := f.Call(in.dl.ctx)
	wd.disarm(in.dl)
	return err
}

func (in *instance) close() {
	in.broken = true
	if in.dl != nil {
		in.m.rt.wd.unregister(in.dl)
		in.dl = nil
	}
	if in.mod != nil {
		if in.m.caps != nil {
			in.m.caps.forget(in.mod)
		}
		_ = in.mod.Close(context.Background())
		in.mod = nil
	}
}

// call invokes f with nargs arguments already in in.stack under the call
// deadline. The first result, if any, is in in.stack[0] afterwards.
func (in *instance) call(ctx context.Context, f fn, nargs int, timeout time.Duration) error {
	if in.broken || in.mod == nil {
		return &CallError{Plugin: in.label, Call: fnNames[f], Err: fmt.Errorf("instance %w after an earlier failure", ErrClosed)}
	}
	if err := ctx.Err(); err != nil {
		return &CallError{Plugin: in.label, Call: fnNames[f], Err: err}
	}
	fun := in.fns[f]
	if fun == nil {
		return &CallError{Plugin: in.label, Call: fnNames[f], Err: fmt.Errorf("%w: %s", ErrMissingExport, fnNames[f])}
	}
	_ = nargs
	wd := in.m.rt.wd
	start := time.Now()
	var err error
	if in.m.rt.cfg.ctxDeadline {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err = fun.CallWithStack(cctx, in.stack[:])
		cancel()
	} else {
		wd.arm(in.dl, timeout)
		err = fun.CallWithStack(in.dl.ctx, in.stack[:])
		wd.disarm(in.dl)
	}
	if err != nil {
		in.broken = true
		return in.classify(fnNames[f], err, time.Since(start), timeout)
	}
	return nil
}

// callStatus calls f and interprets its i32 status result.
func (in *instance) callStatus(ctx context.Context, f fn, nargs int, timeout time.Duration) error {
	if err := in.call(ctx, f, nargs, timeout); err != nil {
		return err
	}
	switch st := int32(in.stack[0]); st {
	case statusOK:
		return nil
	case statusBadInput:
		return &CallError{Plugin: in.label, Call: fnNames[f], Err: fmt.Errorf("%w: %s", ErrBadInput, in.lastError(ctx))}
	case statusFault:
		msg := in.lastError(ctx)
		in.broken = true
		ce := &CallError{Plugin: in.label, Call: fnNames[f], Err: fmt.Errorf("%w: %s", ErrGuestFault, msg)}
		recordFault(ce)
		return ce
	default:
		in.broken = true
		ce := &CallError{Plugin: in.label, Call: fnNames[f], Err: fmt.Errorf("%w: unknown status %d", ErrProtocol, st)}
		recordFault(ce)
		return ce
	}
}

// classify turns a wazero error into a CallError with a sentinel.
func (in *instance) classify(call string, err error, took, timeout time.Duration) error {
	in.broken = true
	var cause error
	var exit *sys.ExitError
	switch {
	case in.dl != nil && in.dl.expired.Load(), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded:
		cause = fmt.Errorf("%w: ran %v, limit %v", ErrTimeout, took.Round(time.Millisecond), timeout)
	case in.outOfMemory():
		cause = fmt.Errorf("%w: limit %d pages (%d MiB): %v", ErrOutOfMemory, in.m.limits.MemoryPages, in.m.limits.MemoryPages/16, err)
	case errors.As(err, &exit):
		cause = fmt.Errorf("%w: guest exited with code %d", ErrTrap, exit.ExitCode())
	default:
		cause = fmt.Errorf("%w: %v", ErrTrap, firstLine(err.Error()))
	}
	if s := in.stderr.String(); s != "" {
		cause = fmt.Errorf("%w; stderr: %s", cause, stderrSummary(s))
	}
	ce := &CallError{Plugin: in.label, Call: call, Err: cause}
	recordFault(ce)
	return ce
}

// outOfMemory guesses whether a failure was memory exhaustion: the guest
// said so (Go's runtime prints "out of memory") or memory is at its cap.
func (in *instance) outOfMemory() bool {
	if strings.Contains(in.stderr.String(), "out of memory") {
		return true
	}
	if in.mem == nil {
		return false
	}
	return uint64(in.mem.Size())/65536+16 >= uint64(in.m.limits.MemoryPages)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// stderrSummary picks the line that says why a guest died (Go prints
// "fatal error: ..." or "panic: ..." before its stack), else the last lines.
func stderrSummary(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "panic:") {
			return line
		}
	}
	return lastLines(s, 3)
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// lastError reads the guest's message for the last non-zero status.
func (in *instance) lastError(ctx context.Context) string {
	if err := in.call(ctx, fnLastError, 0, in.m.limits.CallTimeout); err != nil {
		return "(last_error failed: " + err.Error() + ")"
	}
	b, err := in.packed(in.stack[0], 4096)
	if err != nil {
		return "(last_error: " + err.Error() + ")"
	}
	return string(b)
}

// packed resolves a (ptr<<32 | len) result to a copy of guest memory.
func (in *instance) packed(v uint64, max int) ([]byte, error) {
	ptr, n := uint32(v>>32), uint32(v)
	if int(n) > max {
		return nil, fmt.Errorf("%d bytes exceeds the cap of %d", n, max)
	}
	b, ok := in.mem.Read(ptr, n)
	if !ok {
		return nil, fmt.Errorf("%w: range [%d,+%d) outside memory of %d bytes", ErrProtocol, ptr, n, in.mem.Size())
	}
	return append([]byte(nil), b...), nil
}

func (in *instance) readMetadata(ctx context.Context) (Metadata, error) {
	if err := in.call(ctx, fnABIVersion, 0, in.m.limits.CallTimeout); err != nil {
		return Metadata{}, err
	}
	if v := int32(in.stack[0]); v != ABIVersion {
		return Metadata{}, &CallError{Plugin: in.label, Call: "abi_version", Err: fmt.Errorf("%w: plugin speaks %d, host speaks %d", ErrABIVersion, v, ABIVersion)}
	}
	if err := in.call(ctx, fnMetadata, 0, in.m.limits.CallTimeout); err != nil {
		return Metadata{}, err
	}
	b, err := in.packed(in.stack[0], in.m.limits.MaxMetadataBytes)
	if err != nil {
		return Metadata{}, &CallError{Plugin: in.label, Call: "metadata", Err: fmt.Errorf("%w: %w", ErrMetadata, err)}
	}
	meta, err := parseMetadata(b, in.m.limits)
	if err != nil {
		return meta, &CallError{Plugin: in.label, Call: "metadata", Err: err}
	}
	return meta, nil
}

// alloc reserves size bytes of guest memory (8-byte aligned).
func (in *instance) alloc(ctx context.Context, size int) (uint32, error) {
	if size < 0 || size > int(in.m.limits.MemoryPages)*65536 {
		return 0, &CallError{Plugin: in.label, Call: "alloc", Err: fmt.Errorf("%w: %d bytes exceeds the memory limit", ErrOutOfMemory, size)}
	}
	in.stack[0] = uint64(size)
	if err := in.call(ctx, fnAlloc, 1, in.m.limits.InitTimeout); err != nil {
		return 0, err
	}
	p := uint32(in.stack[0])
	if p == 0 || p%8 != 0 {
		in.broken = true
		return 0, &CallError{Plugin: in.label, Call: "alloc", Err: fmt.Errorf("%w: alloc(%d) returned %#x, want non-null and 8-byte aligned", ErrProtocol, size, p)}
	}
	if _, ok := in.mem.Read(p, uint32(size)); !ok {
		in.broken = true
		return 0, &CallError{Plugin: in.label, Call: "alloc", Err: fmt.Errorf("%w: alloc(%d) returned %#x outside memory", ErrProtocol, size, p)}
	}
	return p, nil
}

// free releases buffers from alloc (free is an optional export: guests with
// a bump allocator omit it). Failures break the instance like any call.
func (in *instance) free(ctx context.Context, ptrs ...uint32) error {
	if in.fns[fnFree] == nil {
		return nil
	}
	for _, p := range ptrs {
		in.stack[0] = uint64(p)
		if err := in.call(ctx, fnFree, 1, in.m.limits.CallTimeout); err != nil {
			return err
		}
	}
	return nil
}

// bytesAt views guest memory (valid until the guest's memory grows, i.e.
// until the next call).
func (in *instance) bytesAt(p uint32, n int) []byte {
	b, ok := in.mem.Read(p, uint32(n))
	if !ok {
		panic(fmt.Sprintf("plugins: view [%d,+%d) outside guest memory", p, n)) // host bug: buffers come from alloc
	}
	return b
}

// f32At views n float32s of guest memory at p (little-endian host assumed,
// as on amd64 and arm64).
func (in *instance) f32At(p uint32, n int) []float32 {
	if n == 0 {
		return nil
	}
	b := in.bytesAt(p, 4*n)
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
}
