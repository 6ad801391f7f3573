package pluginhost

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// watchdog enforces per-call deadlines without a timer per call: each
// instance publishes its deadline in an atomic, and one goroutine per
// runtime interrupts the instance once it passes: it sets the instrumented
// module's interrupt global (the guest traps at its next loop header or
// call) and cancels the instance's long-lived context (for modules compiled
// with wazero's WithCloseOnContextDone instead). A call's extra cost is two
// atomic stores and a clock read.
type watchdog struct {
	tick  time.Duration
	mu    sync.Mutex
	set   map[*deadlined]struct{}
	quit  chan struct{}
	once  sync.Once
	start sync.Once
	base  time.Time
}

// deadlined is the part of an instance the watchdog sees.
type deadlined struct {
	deadline atomic.Int64 // nanoseconds since watchdog base; 0 = no call in flight
	expired  atomic.Bool
	ctx      context.Context
	cancel   context.CancelFunc
	// stop is an instrumented module's interrupt global (interrupt.go);
	// nil when wazero's own checks watch ctx.
	stop api.MutableGlobal
}

func newWatchdog(tick time.Duration) *watchdog {
	return &watchdog{tick: tick, set: map[*deadlined]struct{}{}, quit: make(chan struct{}), base: time.Now()}
}

func (w *watchdog) now() int64 { return int64(time.Since(w.base)) }

// register returns a deadline slot whose ctx is canceled when a call overruns.
func (w *watchdog) register(stop api.MutableGlobal) *deadlined {
	w.start.Do(func() { go w.loop() })
	d := &deadlined{stop: stop}
	// Host functions read the call's deadline from the context (callContext).
	d.ctx, d.cancel = context.WithCancel(context.WithValue(context.Background(), callSlotKey{}, callSlot{w, d}))
	w.mu.Lock()
	w.set[d] = struct{}{}
	w.mu.Unlock()
	return d
}

func (w *watchdog) unregister(d *deadlined) {
	w.mu.Lock()
	delete(w.set, d)
	w.mu.Unlock()
	d.cancel()
}

func (w *watchdog) arm(d *deadlined, timeout time.Duration) {
	d.deadline.Store(w.now() + int64(timeout))
}

func (w *watchdog) disarm(d *deadlined) { d.deadline.Store(0) }

func (w *watchdog) loop() {
	t := time.NewTicker(w.tick)
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-t.C:
		}
		now := w.now()
		w.mu.Lock()
		for d := range w.set {
			// CAS so a call that ended (or a new one armed) since the load
			// is never canceled by mistake.
			if dl := d.deadline.Load(); dl > 0 && now > dl && d.deadline.CompareAndSwap(dl, -1) {
				d.expired.Store(true)
				if d.stop != nil {
					// Read by the guest's own code at its next loop header
					// or call: a plain store, like wazero's close flag.
					d.stop.Set(1)
				}
				d.cancel()
			}
		}
		w.mu.Unlock()
	}
}

func (w *watchdog) stop() { w.once.Do(func() { close(w.quit) }) }
