package pluginhost

import (
	"context"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/plugintest"
)

// testLimits keep hostile cases quick.
var testLimits = Limits{MemoryPages: 512, CallTimeout: time.Second, InitTimeout: 2 * time.Second}

// bombLimits give memory bombs time to hit the cap even on a loaded machine,
// so the test sees out-of-memory and never a deadline.
var bombLimits = Limits{MemoryPages: 512, CallTimeout: 30 * time.Second, InitTimeout: 30 * time.Second}

func newTestRuntime(t testing.TB) *Runtime {
	t.Helper()
	ctx := context.Background()
	rt, err := NewRuntime(ctx, RuntimeConfig{CacheDir: plugintest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(ctx) })
	return rt
}

func load(t testing.TB, rt *Runtime, wasm []byte, l Limits) *Module {
	t.Helper()
	m, err := rt.Load(context.Background(), wasm, LoadOptions{Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// batch holds caller-side buffers for a VecEnv.
type batch struct {
	obs, fin, act, rew []float32
	term, trunc        []bool
}

func newBatch(v interface {
	NumEnvs() int
}, od, ad int) *batch {
	n := v.NumEnvs()
	return &batch{obs: make([]float32, n*od), fin: make([]float32, n*od), act: make([]float32, n*ad),
		rew: make([]float32, n), term: make([]bool, n), trunc: make([]bool, n)}
}

func (b *batch) step(v *VecEnv) error { return v.Step(b.act, b.obs, b.rew, b.term, b.trunc, b.fin) }

// stepOK asserts the env at m still works: reset and a few steps.
func stepOK(t *testing.T, m *Module) {
	t.Helper()
	v, err := m.NewVecEnv(context.Background(), 4, 7)
	if err != nil {
		t.Fatalf("healthy plugin %s: %v", m.Metadata().Label(), err)
	}
	defer v.Close()
	b := newBatch(v, v.od, v.ad)
	if err := v.Reset(0, b.obs); err != nil {
		t.Fatalf("healthy plugin reset: %v", err)
	}
	for i := 0; i < 3; i++ {
		if err := b.step(v); err != nil {
			t.Fatalf("healthy plugin step: %v", err)
		}
	}
}

func nan() float64 { var z float64; return z / z }
