// Package rolloutworker runs an I/O-bound rollout worker: many env plugin
// instances at once (max_concurrency, e.g. 100), each on its own goroutine,
// most of them waiting on an inference endpoint through the http
// capability. A goroutine blocked in network I/O holds no OS thread, so the
// worker needs a handful of threads whatever its concurrency; memory is the
// instances' linear memory plus small per-episode buffers. Finished episodes
// go to a trajectory pool (which pushes back when the trainer lags); a
// failed episode (deadline, exhausted retries, trap) is replayed from its
// seed on a fresh instance, so no trajectory is lost or half-recorded.
package rolloutworker

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/trajpool"
)

// Sink takes finished trajectories: a *trajpool.Pool in the same process,
// or a *trajpool.Client of one on another node.
type Sink interface {
	Put(ctx context.Context, t trajpool.Trajectory) error
}

// Config configures a worker.
type Config struct {
	Name        string
	Module      *pluginhost.Module // an env plugin, loaded with its grants
	Concurrency int                // env instances in flight (default 100)
	Episodes    int64              // episodes to finish (required)
	Seed        uint64             // episode e is reset with Seed+e
	// Stride and Offset number this worker's episodes when several share
	// one numbering: its i-th episode is Offset + i*Stride (Stride
	// default 1). Skip, when set, passes over episodes already done (by a
	// predecessor, before a crash); they count towards Episodes.
	Stride, Offset int64
	Skip           func(episode int64) bool
	// Policy picks an action for an observation (default: all zeros). It is
	// called from many goroutines at once.
	Policy func(episode int64, obs, action []float32)
	Pool   Sink
	// Version is the weight version of trajectories that made no inference
	// call (e.g. the local policy's); calls record their endpoint's.
	Version func() int64
	// MaxAttempts bounds replays of one episode (default 5); an episode
	// failing that often fails the worker. Negative: replay without end,
	// backing off up to 10 s between attempts (an endpoint that is down
	// makes the worker wait, with Live.Waiting saying why).
	MaxAttempts int
	MaxSteps    int // per episode (default: the plugin's max_episode_steps, else 1000)
	// Live, when set, is updated as episodes finish.
	Live *Live
}

// Live is a running worker's progress, read while it runs.
type Live struct {
	Episodes atomic.Int64 // trajectories put
	Replayed atomic.Int64 // episodes replayed after a failure
	Failing  atomic.Int64 // episodes whose last attempt failed, not yet replayed to success
	lastErr  atomic.Pointer[string]
}

// LastError is the newest failure of an episode still failing ("" when
// none is).
func (l *Live) LastError() string {
	if l.Failing.Load() == 0 {
		return ""
	}
	if p := l.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// Stats report a finished Run.
type Stats struct {
	Episodes       int64 // trajectories put in the pool
	Replayed       int64 // episodes replayed after a failure
	PeakMemory     int64 // most instance linear memory in use at once, bytes
	InstanceMemory int64 // linear memory of the instances at the end, bytes
}

// Run runs cfg.Episodes episodes and returns when all are in the pool, an
// episode failed MaxAttempts times, or ctx ends.
func Run(ctx context.Context, cfg Config) (Stats, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 100
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 5
	}
	meta := cfg.Module.Metadata()
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = meta.MaxEpisodeSteps
		if cfg.MaxSteps <= 0 {
			cfg.MaxSteps = 1000
		}
	}
	if cfg.Stride <= 0 {
		cfg.Stride = 1
	}
	if cfg.Live == nil {
		cfg.Live = &Live{}
	}
	if cfg.Episodes <= 0 || cfg.Pool == nil {
		return Stats{}, fmt.Errorf("rollout worker %s: needs episodes > 0 and a pool", cfg.Name)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		next, done, replayed atomic.Int64
		memNow, memPeak      atomic.Int64
		memEnd               atomic.Int64
		wg                   sync.WaitGroup
	)
	od, ad := meta.Observation.Dim(), meta.Action.Dim()
	for range min(int64(cfg.Concurrency), cfg.Episodes) {
		wg.Go(func() {
			env, err := cfg.Module.NewVecEnv(ctx, 1, cfg.Seed)
			if err != nil {
				cancel(fmt.Errorf("rollout worker %s: %w", cfg.Name, err))
				return
			}
			var mem int64
			setMem := func(m int64) {
				now := memNow.Add(m - mem)
				mem = m
				for p := memPeak.Load(); now > p && !memPeak.CompareAndSwap(p, now); p = memPeak.Load() {
				}
			}
			defer func() {
				memEnd.Add(int64(env.InstanceMemoryBytes()))
				setMem(0)
				env.Close()
			}()
			r := runner{cfg: cfg, env: env, od: od, ad: ad}
			for {
				i := next.Add(1) - 1
				if i >= cfg.Episodes || ctx.Err() != nil {
					return
				}
				e := cfg.Offset + i*cfg.Stride
				if cfg.Skip != nil && cfg.Skip(e) {
					continue
				}
				t, err := r.play(ctx, e, setMem, &replayed)
				if err != nil {
					cancel(err)
					return
				}
				if ctx.Err() != nil {
					return
				}
				t.Worker = cfg.Name
				if err := cfg.Pool.Put(ctx, t); err != nil {
					cancel(fmt.Errorf("rollout worker %s: %w", cfg.Name, err))
					return
				}
				done.Add(1)
				cfg.Live.Episodes.Add(1)
			}
		})
	}
	wg.Wait()
	st := Stats{Episodes: done.Load(), Replayed: replayed.Load(), PeakMemory: memPeak.Load(), InstanceMemory: memEnd.Load()}
	if err := context.Cause(ctx); err != nil && st.Episodes < cfg.Episodes {
		return st, err
	}
	return st, nil
}

// play plays episode e until an attempt succeeds; a failed attempt is
// replayed from the seed on the same instance (the host discarded the
// broken one), up to MaxAttempts.
func (r *runner) play(ctx context.Context, e int64, setMem func(int64), replayed *atomic.Int64) (trajpool.Trajectory, error) {
	cfg := r.cfg
	failing := false
	defer func() {
		if failing {
			cfg.Live.Failing.Add(-1)
		}
	}()
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		t, err := r.episode(ctx, e)
		setMem(int64(r.env.InstanceMemoryBytes()))
		if err == nil || ctx.Err() != nil {
			return t, nil
		}
		if attempt == cfg.MaxAttempts {
			return t, fmt.Errorf("rollout worker %s: episode %d failed %d times, last: %w", cfg.Name, e, attempt, err)
		}
		replayed.Add(1)
		cfg.Live.Replayed.Add(1)
		msg := fmt.Sprintf("episode %d, attempt %d: %v", e, attempt, err)
		cfg.Live.lastErr.Store(&msg)
		if !failing {
			failing = true
			cfg.Live.Failing.Add(1)
		}
		if cfg.MaxAttempts < 0 {
			select {
			case <-ctx.Done():
				return t, nil
			case <-time.After(wait):
			}
			wait = min(2*wait, 10*time.Second)
		}
	}
}

// runner is one goroutine's env and buffers.
type runner struct {
	cfg    Config
	env    *pluginhost.VecEnv
	od, ad int
}

// episode plays episode e from its seed. A failure leaves nothing behind:
// the partial trajectory and its calls are discarded.
func (r *runner) episode(ctx context.Context, e int64) (trajpool.Trajectory, error) {
	t := trajpool.Trajectory{Episode: e, Seed: r.cfg.Seed + uint64(e)}
	obs, fin := make([]float32, r.od), make([]float32, r.od)
	rew, term, trunc := make([]float32, 1), make([]bool, 1), make([]bool, 1)
	r.env.TakeHTTPExchanges() // calls of an earlier, failed attempt
	if err := r.env.Reset(t.Seed, obs); err != nil {
		return t, err
	}
	for s := 0; s < r.cfg.MaxSteps; s++ {
		act := make([]float32, r.ad)
		if r.cfg.Policy != nil {
			r.cfg.Policy(e, obs, act)
		}
		step := trajpool.Step{Obs: append([]float32(nil), obs...), Action: act}
		if err := r.env.Step(act, obs, rew, term, trunc, fin); err != nil {
			return t, err
		}
		step.Reward = rew[0]
		t.Steps = append(t.Steps, step)
		t.Return += rew[0]
		for _, x := range r.env.TakeHTTPExchanges() {
			t.Calls = append(t.Calls, trajpool.Call{Endpoint: x.Endpoint, Request: x.Request, Response: x.Response, Attempts: x.Attempts, WeightVersion: x.WeightVersion})
		}
		if term[0] || trunc[0] {
			break
		}
	}
	t.WeightVersion = math.MaxInt64
	for _, c := range t.Calls {
		t.WeightVersion = min(t.WeightVersion, c.WeightVersion)
	}
	if len(t.Calls) == 0 {
		t.WeightVersion = 0
		if r.cfg.Version != nil {
			t.WeightVersion = r.cfg.Version()
		}
	}
	return t, ctx.Err()
}
