package pluginhost

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/trainyard/trainyard/internal/plugintest"
)

// TestShippedPluginsAreInstrumented: the Go and AssemblyScript examples are
// rewritten (not left to wazero's slow checks) and still step.
func TestShippedPluginsAreInstrumented(t *testing.T) {
	rt := newTestRuntime(t)
	mods := map[string][]byte{
		"go cartpole":    plugintest.BuildGo(t, "./plugins/cartpole"),
		"go tictactoe":   plugintest.BuildGo(t, "./plugins/tictactoe"),
		"as cartpole":    plugintest.AssemblyScript(t, "cartpole-as"),
		"as reward-clip": plugintest.AssemblyScript(t, "reward-clip-as"),
		"as template":    plugintest.AssemblyScript(t, "goleft"),
	}
	for name, wasm := range mods {
		if _, err := instrument(wasm); err != nil {
			t.Errorf("%s: instrument: %v", name, err)
		}
		if m := load(t, rt, wasm, testLimits); !m.instrumented {
			t.Errorf("%s: loaded with wazero's checks, want instrumented", name)
		}
	}
	stepOK(t, load(t, rt, mods["go cartpole"], testLimits))
	stepOK(t, load(t, rt, mods["as cartpole"], testLimits))
}

// TestInstrumentFallback: a module the rewriter refuses (it already uses the
// global's name) loads with wazero's own checks, and a loop is still stopped.
func TestInstrumentFallback(t *testing.T) {
	rt := newTestRuntime(t)
	m := handmadeEnv(func(n string, f *wfunc) {
		if n == "step_batch" {
			f.body = opLoopForever
		}
	})
	m.funcs = append(m.funcs, wfunc{name: interruptGlobal, body: nil})
	wasm := m.encode()
	if _, err := instrument(wasm); !errors.Is(err, errNoInstrument) {
		t.Fatalf("instrument error = %v, want errNoInstrument", err)
	}
	mod := load(t, rt, wasm, testLimits)
	if mod.instrumented {
		t.Fatal("module was instrumented")
	}
	v, err := mod.NewVecEnv(context.Background(), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	b := newBatch(v, 4, 1)
	if err := v.Reset(0, b.obs); err != nil {
		t.Fatal(err)
	}
	if err := b.step(v); !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "step_batch") {
		t.Fatalf("step error = %v, want ErrTimeout from step_batch", err)
	}
}

// FuzzInstrument: the rewriter never panics, and whatever wazero compiles,
// its rewrite compiles too (else Load would silently lose the fast path).
func FuzzInstrument(f *testing.F) {
	f.Add(handmadeEnv(nil).encode())
	f.Add(handmadeEnv(func(n string, fn *wfunc) {
		if n == "step_batch" {
			fn.body = opGrowForever
		}
	}).encode())
	m := handmadeEnv(nil)
	m.funcs = append(m.funcs, wfunc{name: "spin", body: opLoopForever})
	m.start = "spin"
	f.Add(m.encode())
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	f.Fuzz(func(t *testing.T, wasm []byte) {
		if !bytes.HasPrefix(wasm, wasmMagic) || precheck(wasm) != nil {
			return
		}
		out, err := instrument(wasm)
		if err != nil {
			return
		}
		if _, err := r.CompileModule(ctx, wasm); err != nil {
			return
		}
		if _, err := r.CompileModule(ctx, out); err != nil {
			t.Fatalf("original compiles, rewrite does not: %v", err)
		}
	})
}

// TestGCWhileGuestSpins: a guest in an infinite loop does not hold off the
// garbage collector's stop-the-world (machine code cannot be preempted; the
// instrumentation returns to Go every fuelPerExit checks): runtime.GC
// finishes while the call is still running, long before its deadline.
func TestGCWhileGuestSpins(t *testing.T) {
	rt := newTestRuntime(t)
	m := load(t, rt, handmadeEnv(func(n string, f *wfunc) {
		if n == "step_batch" {
			f.body = opLoopForever
		}
	}).encode(), Limits{MemoryPages: 512, CallTimeout: 5 * time.Second, InitTimeout: 5 * time.Second})
	v, err := m.NewVecEnv(context.Background(), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	b := newBatch(v, 4, 1)
	if err := v.Reset(0, b.obs); err != nil {
		t.Fatal(err)
	}
	stepped := make(chan error, 1)
	started := make(chan struct{})
	go func() { close(started); stepped <- b.step(v) }()
	<-started
	time.Sleep(50 * time.Millisecond) // let the call enter the guest
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	select {
	case err := <-stepped:
		t.Fatalf("step ended before the GCs (%v); the test did not overlap them", err)
	default:
	}
	if err := <-stepped; !errors.Is(err, ErrTimeout) {
		t.Fatalf("step error = %v, want ErrTimeout", err)
	}
}
