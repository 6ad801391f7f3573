package pluginhost

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/plugintest"
)

var fuzzLimits = Limits{MemoryPages: 256, CallTimeout: 200 * time.Millisecond, InitTimeout: time.Second, PoolSize: 2}

// FuzzValidate feeds arbitrary bytes (seeded with well-formed and hostile
// modules) to the upload validator: it must never panic, and every
// rejection must be an ErrInvalidPlugin.
func FuzzValidate(f *testing.F) {
	f.Add(handmadeEnv(nil).encode())
	f.Add(handmadeEnv(func(n string, fn *wfunc) {
		if n == "metadata" {
			fn.body = i64c(256<<32 | 1<<30)
		}
	}).encode())
	f.Add(plugintest.AssemblyScript(f, "cartpole-as"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	f.Add([]byte("not wasm"))
	rt := newTestRuntime(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, wasm []byte) {
		if len(wasm) > 1<<20 {
			return
		}
		meta, err := rt.Validate(ctx, wasm, fuzzLimits)
		if err != nil && !errors.Is(err, ErrInvalidPlugin) {
			t.Fatalf("rejection %v is not ErrInvalidPlugin", err)
		}
		if err == nil && (meta.Name == "" || meta.ABIVersion != ABIVersion) {
			t.Fatalf("accepted with metadata %+v", meta)
		}
	})
}

// FuzzStepBatchActions steps env plugins with arbitrary action values; the
// guest must accept exactly the actions inside Discrete(2) and reject the
// rest with ErrBadInput, keeping its instance.
func FuzzStepBatchActions(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 128, 63}, uint8(2))
	f.Add([]byte{0, 0, 192, 127, 0, 0, 0, 0}, uint8(2)) // NaN
	f.Add([]byte{0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(3))
	rt := newTestRuntime(f)
	mods := []*Module{
		load(f, rt, plugintest.AssemblyScript(f, "cartpole-as"), fuzzLimits),
		load(f, rt, plugintest.BuildGo(f, "./internal/pluginhost/testdata/hostile"), fuzzLimits),
	}
	ctx := context.Background()
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, raw []byte, n uint8) {
		mu.Lock()
		defer mu.Unlock()
		if n == 0 || n > 64 {
			return
		}
		act := make([]float32, n)
		valid := true
		for i := range act {
			if 4*i+4 <= len(raw) {
				act[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
			if a := act[i]; !(a == 0 || a == 1) {
				valid = false
			}
		}
		for _, m := range mods {
			if m.Metadata().Name == "hostile" && (n == 13 || n == 14) {
				continue // sizes the hostile plugin misbehaves on by design
			}
			v, err := m.NewVecEnv(ctx, int(n), 1)
			if err != nil {
				t.Fatal(err)
			}
			b := newBatch(v, v.od, v.ad)
			if err := v.Reset(9, b.obs); err != nil { // seed 9: the hostile plugin behaves
				t.Fatal(err)
			}
			copy(b.act, act)
			err = b.step(v)
			switch {
			case valid && err != nil:
				t.Fatalf("%s: valid actions %v rejected: %v", m.Metadata().Name, act, err)
			case !valid && !errors.Is(err, ErrBadInput):
				t.Fatalf("%s: invalid actions %v: error %v, want ErrBadInput", m.Metadata().Name, act, err)
			}
			clear(b.act)
			if err := b.step(v); err != nil {
				t.Fatalf("%s: instance unusable after bad input: %v", m.Metadata().Name, err)
			}
			v.Close()
		}
	})
}

// FuzzStepBatchRaw calls step_batch with arbitrary n and pointers, as a
// broken or malicious host-side caller could: the host must never crash;
// the guest either rejects the call, traps (instance discarded), or runs;
// and the module keeps serving fresh instances.
func FuzzStepBatchRaw(f *testing.F) {
	f.Add(int32(4), uint32(0), uint32(0), uint32(0), uint32(0), uint32(0), uint32(0))
	f.Add(int32(4), uint32(1<<31), uint32(8), uint32(16), uint32(24), uint32(32), uint32(40))
	f.Add(int32(-1), uint32(1), uint32(2), uint32(3), uint32(4), uint32(5), uint32(6))
	f.Add(int32(4), uint32(0xfffffff0), uint32(1024), uint32(2048), uint32(3072), uint32(3080), uint32(4096))
	rt := newTestRuntime(f)
	mods := []*Module{
		load(f, rt, plugintest.AssemblyScript(f, "cartpole-as"), fuzzLimits),
		load(f, rt, handmadeEnv(nil).encode(), fuzzLimits),
	}
	ctx := context.Background()
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, n int32, a, o, r, te, tr, fo uint32) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range mods {
			in, err := m.acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			in.stack[0], in.stack[1] = 4, 1
			if err := in.callStatus(ctx, fnInit, 2, time.Second); err != nil {
				t.Fatal(err)
			}
			s := &in.stack
			s[0], s[1], s[2], s[3], s[4], s[5], s[6] = uint64(uint32(n)), uint64(a), uint64(o), uint64(r), uint64(te), uint64(tr), uint64(fo)
			err = in.callStatus(ctx, fnStepBatch, 7, fuzzLimits.CallTimeout)
			var ce *CallError
			if err != nil && (!errors.As(err, &ce) || !(errors.Is(err, ErrBadInput) || errors.Is(err, ErrTrap) ||
				errors.Is(err, ErrTimeout) || errors.Is(err, ErrOutOfMemory) || errors.Is(err, ErrGuestFault))) {
				t.Fatalf("unexpected error class: %v", err)
			}
			if errors.Is(err, ErrBadInput) && in.broken {
				t.Fatal("bad input broke the instance")
			}
			m.release(in)
			stepOK(t, m)
		}
	})
}
