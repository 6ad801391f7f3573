// Package pluginhost hosts Trainyard's WASM plugins (ABI v1, docs/plugin-abi.md)
// on wazero: environments (as envs.VecEnv), reward functions and games.
//
// A Runtime owns the compilation cache and the deadline watchdog. Load
// compiles a module once; a Module hands out pooled, sandboxed instances
// through NewVecEnv, RewardBatch and NewGames. Validate is Load plus a smoke
// run, for upload-time checks.
package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
)

// RuntimeConfig configures a Runtime.
type RuntimeConfig struct {
	// CacheDir holds compiled machine code across processes (a Go-built
	// plugin then loads in tens of ms instead of ~1 s). Empty: memory only.
	CacheDir string
	// WatchdogTick is how often deadlines are checked (default 5ms); a call
	// is interrupted at most one tick after its deadline.
	WatchdogTick time.Duration

	// noInterrupt compiles without any interruption: calls can then not be
	// interrupted. Worker processes (killed at the deadline instead) and
	// benchmarks set it.
	noInterrupt bool
	// wazeroChecks interrupts with wazero's WithCloseOnContextDone instead
	// of instrumenting the module (interrupt.go); benchmarks compare the two.
	wazeroChecks bool
	// ctxDeadline gives each call its own context.WithTimeout instead of the
	// watchdog (implies wazeroChecks); benchmarks compare the two.
	ctxDeadline bool
}

// instrumented reports whether modules are rewritten for interruption.
func (c RuntimeConfig) instrumented() bool {
	return !c.noInterrupt && !c.wazeroChecks && !c.ctxDeadline
}

// Runtime compiles and runs plugins. It is safe for concurrent use.
type Runtime struct {
	cfg   RuntimeConfig
	cache wazero.CompilationCache
	wd    *watchdog
	// inits bounds instantiations (start function, Go's _initialize) in
	// flight to the CPUs: a rollout worker opening 100 instances at once on
	// 2 busy cores gave each under a tenth of a core, and their wall-clock
	// init deadline (10 s) expired on healthy plugins. A deadline counts
	// from when its instantiation gets a slot.
	inits chan struct{}

	mu      sync.Mutex
	modules map[*Module]struct{}
	closed  bool
}

// NewRuntime creates a runtime; Close releases it and every loaded module.
func NewRuntime(ctx context.Context, cfg RuntimeConfig) (*Runtime, error) {
	if cfg.WatchdogTick <= 0 {
		cfg.WatchdogTick = 5 * time.Millisecond
	}
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("plugin compilation cache %s: %w", cfg.CacheDir, err)
		}
		cache = c
	} else {
		cache = wazero.NewCompilationCache()
	}
	return &Runtime{cfg: cfg, cache: cache, wd: newWatchdog(cfg.WatchdogTick), inits: make(chan struct{}, runtime.GOMAXPROCS(0)), modules: map[*Module]struct{}{}}, nil
}

// Close closes every module loaded through r, then the runtime.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	mods := make([]*Module, 0, len(r.modules))
	for m := range r.modules {
		mods = append(mods, m)
	}
	r.mu.Unlock()
	for _, m := range mods {
		_ = m.Close(ctx)
	}
	r.wd.stop()
	return r.cache.Close(ctx)
}

// Validate checks a module as an upload handler must before accepting it:
// it compiles, checks imports, exports and ABI version, reads the metadata,
// and runs a smoke test (init, reset and a few steps, or the reward/game
// equivalent) under limits. A plugin using a capability (§8 of the ABI) is
// smoke-tested only as far as it runs without it (env: init and reset). Errors wrap ErrInvalidPlugin and a specific
// sentinel; the message names the plugin, the call and why.
func (r *Runtime) Validate(ctx context.Context, wasm []byte, limits Limits) (Metadata, error) {
	// Capabilities are granted with no endpoints: the module must load and
	// declare what it calls, but nothing leaves the host at upload.
	m, err := r.LoadGranted(ctx, wasm, LoadOptions{Limits: limits}, validationGrants())
	if err != nil {
		return Metadata{}, err
	}
	defer m.Close(ctx)
	if err := m.smoke(ctx); err != nil {
		return m.meta, fmt.Errorf("%w: %w", ErrInvalidPlugin, err)
	}
	return m.meta, nil
}

// SHA256 is the content address of a module, as used for its plugin ID.
func SHA256(wasm []byte) string {
	s := sha256.Sum256(wasm)
	return hex.EncodeToString(s[:])
}
