package pluginhost

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/plugintest"
)

// FuzzEnvRestore feeds arbitrary bytes (seeded with real env_save states,
// truncated and extended) to env_restore of the Go SDK's CartPole and the
// AssemblyScript SDK's: a state that is not exactly what env_save of as
// many envs wrote is refused as bad input, never a fault, and the env keeps
// working; a state that is accepted saves back as long (flags and counts
// come back normalised), and a real state saves back to the same bytes.
func FuzzEnvRestore(f *testing.F) {
	// Roomy deadlines: a Go guest's init can take a while on a loaded machine.
	limits := Limits{CallTimeout: 10 * time.Second, InitTimeout: 30 * time.Second, PoolSize: 2}
	rt := newTestRuntime(f)
	ctx := context.Background()
	mods := []*Module{
		load(f, rt, plugintest.BuildGo(f, "./plugins/cartpole"), limits),
		load(f, rt, plugintest.AssemblyScript(f, "cartpole-as"), limits),
	}
	real := map[string]bool{}
	for _, m := range mods {
		v, err := m.NewVecEnv(ctx, 3, 11)
		if err != nil {
			f.Fatal(err)
		}
		b := newBatch(v, v.od, v.ad)
		if err := v.Reset(11, b.obs); err != nil {
			f.Fatal(err)
		}
		for range 30 {
			if err := b.step(v); err != nil {
				f.Fatal(err)
			}
		}
		st, err := v.Snapshot()
		if err != nil || len(st) == 0 {
			f.Fatalf("%s: env_save: %d bytes, %v", m.Metadata().Label(), len(st), err)
		}
		v.Close()
		real[string(st)] = true
		f.Add(st)
		f.Add(st[:len(st)-1])
		f.Add(append(append([]byte(nil), st...), 0))
	}
	f.Add([]byte{})
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, state []byte) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range mods {
			v, err := m.NewVecEnv(ctx, 3, 5)
			if err != nil {
				t.Fatal(err)
			}
			b := newBatch(v, v.od, v.ad)
			if err := v.Reset(5, b.obs); err != nil {
				t.Fatal(err)
			}
			err = v.RestoreSnapshot(state)
			switch {
			case err == nil:
				back, err := v.Snapshot()
				if err != nil || len(back) != len(state) || real[string(state)] && !bytes.Equal(back, state) {
					t.Fatalf("%s: accepted %d bytes, saves back %d (%v)", m.Metadata().Label(), len(state), len(back), err)
				}
			case !errors.Is(err, ErrBadInput):
				t.Fatalf("%s: env_restore of %d bytes: %v, want bad input", m.Metadata().Label(), len(state), err)
			}
			if err := b.step(v); err != nil {
				t.Fatalf("%s: step after env_restore: %v", m.Metadata().Label(), err)
			}
			v.Close()
		}
	})
}
