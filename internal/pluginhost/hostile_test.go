package pluginhost

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/trainyard/trainyard/internal/plugintest"
)

// TestHostileStructural rejects malformed modules at Validate with the exact
// sentinel and a message naming the plugin, the call and why; meanwhile a
// healthy plugin on the same runtime keeps stepping.
func TestHostileStructural(t *testing.T) {
	rt := newTestRuntime(t)
	healthy := load(t, rt, handmadeEnv(nil).encode(), testLimits)
	tests := []struct {
		name string
		wasm []byte
		want error
		msg  []string
	}{
		{"not wasm", []byte("#!/bin/sh\nrm -rf /\n"), ErrNotWasm, []string{"validate", "#!/bin/s"}},
		{"empty", nil, ErrNotWasm, nil},
		{"truncated", handmadeEnv(nil).encode()[:40], ErrCompile, nil},
		{"wrong abi version", handmadeEnv(func(n string, f *wfunc) {
			if n == "abi_version" {
				f.body = i32c(2)
			}
		}).encode(), ErrABIVersion, []string{"abi_version", "plugin speaks 2, host speaks 1"}},
		{"missing exports", handmadeEnv(func(n string, f *wfunc) {
			if n == "step_batch" || n == "reset" {
				f.name = "-"
			}
		}).encode(), ErrMissingExport, []string{"[reset step_batch]", "handmade@1"}},
		{"missing common export", handmadeEnv(func(n string, f *wfunc) {
			if n == "alloc" {
				f.name = "-"
			}
		}).encode(), ErrMissingExport, []string{"[alloc]"}},
		{"no memory", func() []byte {
			m := handmadeEnv(func(n string, f *wfunc) {
				if n == "alloc" {
					f.body, f.locals = i32c(1024), nil
				}
			})
			m.noMemory, m.data = true, nil
			return m.encode()
		}(), ErrMissingExport, []string{"memory"}},
		{"unknown host import", func() []byte {
			m := handmadeEnv(nil)
			m.imports = []wimport{{module: "env", name: "launch_missiles", params: []byte{i32}}}
			return m.encode()
		}(), ErrUnknownImport, []string{"env.launch_missiles"}},
		{"huge metadata", handmadeEnv(func(n string, f *wfunc) {
			if n == "metadata" {
				f.body = i64c(256<<32 | 100<<20)
			}
		}).encode(), ErrMetadata, []string{"104857600 bytes exceeds the cap of 65536"}},
		{"metadata outside memory", handmadeEnv(func(n string, f *wfunc) {
			if n == "metadata" {
				f.body = i64c(200000<<32 | 100)
			}
		}).encode(), ErrProtocol, []string{"outside memory"}},
		{"metadata not json", handmadeEnv(func(n string, f *wfunc) {
			if n == "metadata" {
				f.body = i64c(1024<<32 | 10) // zeros
			}
		}).encode(), ErrMetadata, []string{"decode JSON"}},
		{"infinite loop in init", handmadeEnv(func(n string, f *wfunc) {
			if n == "init" {
				f.body = opLoopForever
			}
		}).encode(), ErrTimeout, []string{"init", "limit 2s"}},
		{"infinite loop in _initialize", func() []byte {
			m := handmadeEnv(nil)
			m.funcs = append(m.funcs, wfunc{name: "_initialize", body: opLoopForever})
			return m.encode()
		}(), ErrTimeout, []string{"_initialize", "limit 2s"}},
		{"infinite loop in the start section", func() []byte {
			m := handmadeEnv(nil)
			m.funcs = append(m.funcs, wfunc{name: "spin", body: opLoopForever})
			m.start = "spin"
			return m.encode()
		}(), ErrTimeout, []string{"start", "limit 2s"}},
		{"exponential recursion without loops in step", func() []byte {
			m := handmadeEnv(func(n string, f *wfunc) {
				if n == "step_batch" {
					f.body = cat(i32c(64), []byte{0x10, 7}, i32c(0)) // rec(64); 0
				}
			})
			// func 7: rec(n) { if n == 0 { return }; rec(n-1); rec(n-1) }
			dec := []byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x07}
			m.funcs = append(m.funcs, wfunc{name: "rec", params: []byte{i32},
				body: cat([]byte{0x20, 0x00, 0x45, 0x04, 0x40, 0x0f, 0x0b}, dec, dec)})
			return m.encode()
		}(), ErrTimeout, []string{"step_batch", "limit 1s"}},
		{"infinite loop in step", handmadeEnv(func(n string, f *wfunc) {
			if n == "step_batch" {
				f.body = opLoopForever
			}
		}).encode(), ErrTimeout, []string{"step_batch", "limit 1s"}},
		{"memory bomb", handmadeEnv(func(n string, f *wfunc) {
			if n == "step_batch" {
				f.body = opGrowForever
			}
		}).encode(), ErrOutOfMemory, []string{"step_batch", "limit 512 pages"}},
		{"trap mid-batch", handmadeEnv(func(n string, f *wfunc) {
			if n == "step_batch" { // obs[0] = 1.0 then unreachable
				f.body = cat([]byte{0x20, 0x02}, []byte{0x43, 0, 0, 0x80, 0x3f}, []byte{0x38, 0x02, 0x00}, opUnreachable)
			}
		}).encode(), ErrTrap, []string{"step_batch", "unreachable"}},
		{"bad status", handmadeEnv(func(n string, f *wfunc) {
			if n == "reset" {
				f.body = i32c(77)
			}
		}).encode(), ErrProtocol, []string{"reset", "unknown status 77"}},
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The healthy plugin steps concurrently with the hostile one.
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); stepOK(t, healthy) }()
			l := testLimits
			if tc.want == ErrOutOfMemory {
				l = bombLimits
			}
			_, err := rt.Validate(ctx, tc.wasm, l)
			wg.Wait()
			if !errors.Is(err, ErrInvalidPlugin) || !errors.Is(err, tc.want) {
				t.Fatalf("Validate error = %v, want ErrInvalidPlugin and %v", err, tc.want)
			}
			for _, s := range tc.msg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			stepOK(t, healthy)
		})
	}
}

// TestHostileGoGuest runs a misbehaving Go-built plugin: each failure is
// reported with its sentinel, the instance is discarded, and both another
// plugin and a fresh instance of the same plugin keep working.
func TestHostileGoGuest(t *testing.T) {
	rt := newTestRuntime(t)
	healthy := load(t, rt, handmadeEnv(nil).encode(), testLimits)
	wasm := plugintest.BuildGo(t, "./internal/pluginhost/testdata/hostile")
	hostile := load(t, rt, wasm, testLimits)
	bomb := load(t, rt, wasm, bombLimits)
	ctx := context.Background()
	tests := []struct {
		name string
		n    int    // envs at init
		seed uint64 // reset seed selects the step misbehaviour
		call string
		want error
		msg  []string
		not  string
	}{
		{name: "infinite loop in init", n: 13, call: "init", want: ErrTimeout},
		{name: "reads /etc/passwd", n: 14, call: "init", want: ErrGuestFault, msg: []string{"sandbox held", "open /etc/passwd"}, not: "root:"},
		{name: "infinite loop in step", n: 4, seed: 1, call: "step_batch", want: ErrTimeout, msg: []string{"limit 1s"}},
		{name: "memory bomb", n: 4, seed: 2, call: "step_batch", want: ErrOutOfMemory, msg: []string{"out of memory"}},
		{name: "fatal error mid-batch", n: 4, seed: 3, call: "step_batch", want: ErrTrap, msg: []string{"unlock of unlocked mutex"}},
		{name: "panic mid-batch", n: 4, seed: 4, call: "step_batch", want: ErrGuestFault, msg: []string{"panic: env 2 exploded"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := func() error {
				m := hostile
				if tc.want == ErrOutOfMemory {
					m = bomb
				}
				v, err := m.NewVecEnv(ctx, tc.n, 0)
				if err != nil {
					return err
				}
				defer v.Close()
				b := newBatch(v, 1, 1)
				if err := v.Reset(tc.seed, b.obs); err != nil {
					return err
				}
				if err := b.step(v); err != nil {
					// The broken instance was dropped: the env must refuse to
					// step until Reset brings a fresh instance.
					if err2 := b.step(v); err2 == nil || !strings.Contains(err2.Error(), "call Reset") {
						t.Errorf("step after failure = %v, want a call-Reset error", err2)
					}
					return err
				}
				return nil
			}()
			var ce *CallError
			if !errors.Is(err, tc.want) || !errors.As(err, &ce) || ce.Call != tc.call || !strings.Contains(ce.Plugin, "hostile@0.0.1") {
				t.Fatalf("error = %v, want %v from call %s of hostile@0.0.1", err, tc.want, tc.call)
			}
			for _, s := range tc.msg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if tc.not != "" && strings.Contains(err.Error(), tc.not) {
				t.Errorf("error %q leaks %q", err, tc.not)
			}
			stepOK(t, healthy)
			stepOK(t, hostile) // a fresh instance of the same module behaves
		})
	}
}

// TestBadInputKeepsInstance: an action outside the space is rejected by the
// guest SDK without losing the instance.
func TestBadInputKeepsInstance(t *testing.T) {
	rt := newTestRuntime(t)
	m := load(t, rt, plugintest.BuildGo(t, "./internal/pluginhost/testdata/hostile"), testLimits)
	v, err := m.NewVecEnv(context.Background(), 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	b := newBatch(v, 1, 1)
	if err := v.Reset(0, b.obs); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []float32{2, -1, 0.5, float32(nan())} {
		b.act[1] = bad
		if err := b.step(v); !errors.Is(err, ErrBadInput) {
			t.Fatalf("action %v: error = %v, want ErrBadInput", bad, err)
		}
	}
	b.act[1] = 1
	if err := b.step(v); err != nil {
		t.Fatalf("step after bad input: %v", err)
	}
	if b.obs[2] != 2 || b.rew[0] != 1 {
		t.Fatalf("obs %v rewards %v, want obs[i]=i and rewards 1", b.obs, b.rew)
	}
}
