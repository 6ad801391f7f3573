package pluginhost

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/plugintest"
)

// TestConcurrentUse: many goroutines share one module (each with its own
// VecEnv) and one reward module, while another goroutine's plugin times out;
// run under -race this checks the pool, the watchdog and the error paths.
func TestConcurrentUse(t *testing.T) {
	rt := newTestRuntime(t)
	env := load(t, rt, plugintest.AssemblyScript(t, "cartpole-as"), Limits{PoolSize: 2})
	shaping := load(t, rt, plugintest.BuildGo(t, "./plugins/shaping"), Limits{PoolSize: 2})
	looping := load(t, rt, handmadeEnv(func(n string, f *wfunc) {
		if n == "step_batch" {
			f.body = opLoopForever
		}
	}).encode(), Limits{CallTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			v, err := env.NewVecEnv(ctx, 8+g, uint64(g))
			if err != nil {
				errs <- err
				return
			}
			defer v.Close()
			s, err := Shape(ctx, v, shaping)
			if err != nil {
				errs <- err
				return
			}
			if _, err := Rollout(ctx, s, 2000, uint64(g)); err != nil {
				errs <- err
			}
		}(g)
	}
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := looping.NewVecEnv(ctx, 2, 0)
			if err != nil {
				errs <- err
				return
			}
			defer v.Close()
			if _, err := Rollout(ctx, v, 10, 0); !errors.Is(err, ErrTimeout) {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
