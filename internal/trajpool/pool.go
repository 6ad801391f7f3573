// Package trajpool is the trajectory pool between I/O-bound rollout workers
// and a trainer: workers Put finished trajectories, the trainer takes
// batches. It is bounded; when full it either blocks the workers
// (back-pressure, the default) or drops the oldest trajectories. Every
// trajectory carries the weight version that produced it, so the trainer
// sees its off-policy lag. Depth, drops, blocked time and lag are OTel
// metrics.
package trajpool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Step is one transition.
type Step struct {
	Obs    []float32 `json:"obs"`
	Action []float32 `json:"action"`
	Reward float32   `json:"reward"`
}

// Call is one inference call made while producing a trajectory (the text
// an LLM trainer learns from).
type Call struct {
	Endpoint      string `json:"endpoint"`
	Request       []byte `json:"request"`
	Response      []byte `json:"response"`
	Attempts      int    `json:"attempts"`
	WeightVersion int64  `json:"weight_version"`
}

// Trajectory is one finished episode.
type Trajectory struct {
	Worker  string  `json:"worker"`
	Episode int64   `json:"episode"`
	Seed    uint64  `json:"seed"`
	Steps   []Step  `json:"steps"`
	Calls   []Call  `json:"calls,omitempty"`
	Return  float32 `json:"return"`
	// WeightVersion produced the trajectory: the oldest version among its
	// calls (the policy's version for trajectories without calls).
	WeightVersion int64 `json:"weight_version"`
}

// Policy says what Put does when the pool is full.
type Policy string

const (
	// Block makes Put wait for room: rollout workers slow to the trainer's pace.
	Block Policy = "block"
	// DropOldest evicts the oldest trajectory: freshest data, bounded lag.
	DropOldest Policy = "drop_oldest"
)

// ErrClosed is returned by Put and Batch after Close.
var ErrClosed = errors.New("trajectory pool closed")

// Options configure a pool.
type Options struct {
	Name          string // metric attribute "pool"
	Capacity      int    // trajectories held (default 1024)
	Policy        Policy // default Block
	MeterProvider metric.MeterProvider
	// MaxLag, when > 0, is the most off-policy lag a trainer takes: older
	// trajectories are discarded when a batch is taken (Stats.Stale).
	MaxLag int64
	// Dedup makes the pool accept each episode number once: a put of an
	// episode it already accepted succeeds without adding anything
	// (Stats.Duplicates), so a worker replaying after a crash, or retrying
	// a put whose answer it lost, never counts an episode twice. Accepted
	// seeds the set (a loop restored from its checkpoint).
	Dedup    bool
	Accepted Ledger
}

// Pool is a bounded FIFO of trajectories. Safe for concurrent use.
type Pool struct {
	name   string
	cap    int
	policy Policy

	mu      sync.Mutex
	items   []Trajectory // ring
	head, n int
	version int64         // the trainer's current weight version
	changed chan struct{} // closed and replaced on every Put, take or Close
	closed  bool
	stats   Stats
	maxLag  int64
	dedup   bool
	seen    Ledger // episodes accepted (Dedup)

	attrs      metric.MeasurementOption
	put        metric.Int64Counter
	taken      metric.Int64Counter
	dropped    metric.Int64Counter
	blocked    metric.Int64Counter
	blockedDur metric.Float64Histogram
	lag        metric.Int64Histogram
}

// Stats are a pool's counters.
type Stats struct {
	Depth       int
	Put         int64
	Taken       int64
	Dropped     int64
	BlockedPuts int64         // puts that waited for room
	BlockedTime time.Duration // total time puts waited
	MaxLag      int64         // largest off-policy lag of a taken trajectory
	Duplicates  int64         // puts of an episode already accepted (Dedup)
	Stale       int64         // trajectories discarded at take time for lag > MaxLag
	// Lag counts taken trajectories by off-policy lag: Lag[i] those of lag
	// i, the last bucket those of LagBuckets-1 or more.
	Lag [LagBuckets]int64
}

// LagBuckets is the size of Stats.Lag.
const LagBuckets = 9

// New creates a pool.
func New(o Options) (*Pool, error) {
	if o.Capacity <= 0 {
		o.Capacity = 1024
	}
	switch o.Policy {
	case "":
		o.Policy = Block
	case Block, DropOldest:
	default:
		return nil, fmt.Errorf("trajectory pool %s: policy %q, want block or drop_oldest", o.Name, o.Policy)
	}
	mp := o.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if o.MaxLag < 0 {
		return nil, fmt.Errorf("trajectory pool %s: max lag %d, want ≥ 0", o.Name, o.MaxLag)
	}
	p := &Pool{name: o.Name, cap: o.Capacity, policy: o.Policy, items: make([]Trajectory, o.Capacity), changed: make(chan struct{}),
		maxLag: o.MaxLag, dedup: o.Dedup, seen: o.Accepted.Clone(),
		attrs: metric.WithAttributes(attribute.String("pool", o.Name), attribute.String("policy", string(o.Policy)))}
	m := mp.Meter("github.com/trainyard/trainyard/internal/trajpool")
	p.put, _ = m.Int64Counter("trainyard.trajpool.put", metric.WithUnit("{trajectory}"), metric.WithDescription("trajectories added"))
	p.taken, _ = m.Int64Counter("trainyard.trajpool.taken", metric.WithUnit("{trajectory}"), metric.WithDescription("trajectories taken by the trainer"))
	p.dropped, _ = m.Int64Counter("trainyard.trajpool.dropped", metric.WithUnit("{trajectory}"), metric.WithDescription("trajectories evicted when full (drop_oldest)"))
	p.blocked, _ = m.Int64Counter("trainyard.trajpool.blocked", metric.WithUnit("{put}"), metric.WithDescription("puts that waited for room (back-pressure)"))
	p.blockedDur, _ = m.Float64Histogram("trainyard.trajpool.blocked.duration", metric.WithUnit("s"), metric.WithDescription("time a put waited for room"))
	p.lag, _ = m.Int64Histogram("trainyard.trajpool.offpolicy.lag", metric.WithUnit("{version}"),
		metric.WithDescription("trainer weight version minus the version that produced a taken trajectory"),
		metric.WithExplicitBucketBoundaries(0, 1, 2, 3, 4, 8, 16))
	_, err := m.Int64ObservableGauge("trainyard.trajpool.depth", metric.WithUnit("{trajectory}"), metric.WithDescription("trajectories waiting"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			p.mu.Lock()
			n := p.n
			p.mu.Unlock()
			o.Observe(int64(n), p.attrs)
			return nil
		}))
	if err != nil {
		return nil, fmt.Errorf("trajectory pool %s: metrics: %w", o.Name, err)
	}
	if _, err := m.Int64ObservableGauge("trainyard.trajpool.capacity", metric.WithUnit("{trajectory}"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error { o.Observe(int64(p.cap), p.attrs); return nil })); err != nil {
		return nil, fmt.Errorf("trajectory pool %s: metrics: %w", o.Name, err)
	}
	return p, nil
}

// signal wakes every waiter; p.mu must be held.
func (p *Pool) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Put adds t. When full it waits for room (Block) or evicts the oldest
// trajectory (DropOldest). It fails only when ctx ends or the pool closes.
func (p *Pool) Put(ctx context.Context, t Trajectory) error {
	var start time.Time
	p.mu.Lock()
	for !p.closed && p.n == p.cap && p.policy == Block {
		if start.IsZero() {
			start = time.Now()
			p.stats.BlockedPuts++
			p.blocked.Add(ctx, 1, p.attrs)
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			p.waited(ctx, start)
			return fmt.Errorf("trajectory pool %s: put: %w", p.name, ctx.Err())
		}
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	if !start.IsZero() {
		p.waitedLocked(ctx, start)
	}
	if p.closed {
		return fmt.Errorf("trajectory pool %s: put: %w", p.name, ErrClosed)
	}
	if p.dedup && !p.seen.Add(t.Episode) {
		p.stats.Duplicates++
		return nil
	}
	if p.n == p.cap { // DropOldest
		p.items[p.head] = Trajectory{}
		p.head = (p.head + 1) % p.cap
		p.n--
		p.stats.Dropped++
		p.dropped.Add(ctx, 1, p.attrs)
	}
	p.items[(p.head+p.n)%p.cap] = t
	p.n++
	p.stats.Put++
	p.put.Add(ctx, 1, p.attrs)
	p.signal()
	return nil
}

func (p *Pool) waited(ctx context.Context, start time.Time) {
	p.mu.Lock()
	p.waitedLocked(ctx, start)
	p.mu.Unlock()
}

func (p *Pool) waitedLocked(ctx context.Context, start time.Time) {
	d := time.Since(start)
	p.stats.BlockedTime += d
	p.blockedDur.Record(ctx, d.Seconds(), p.attrs)
}

// Batch waits until n trajectories are pooled and takes the n oldest;
// with MaxLag, older trajectories are discarded on the way.
func (p *Pool) Batch(ctx context.Context, n int) ([]Trajectory, error) {
	if n < 1 || n > p.cap {
		return nil, fmt.Errorf("trajectory pool %s: batch of %d outside [1,%d]", p.name, n, p.cap)
	}
	out := make([]Trajectory, 0, n)
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(out) < n {
		for !p.closed && p.n < n-len(out) {
			ch := p.changed
			p.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				p.mu.Lock()
				p.unTake(out)
				return nil, fmt.Errorf("trajectory pool %s: batch: %w", p.name, ctx.Err())
			}
			p.mu.Lock()
		}
		if p.n < n-len(out) {
			p.unTake(out)
			return nil, fmt.Errorf("trajectory pool %s: batch: %w with %d of %d trajectories", p.name, ErrClosed, p.n, n)
		}
		for p.n > 0 && len(out) < n {
			t := p.items[p.head]
			p.items[p.head] = Trajectory{}
			p.head = (p.head + 1) % p.cap
			p.n--
			if p.maxLag > 0 && p.version-t.WeightVersion > p.maxLag {
				p.stats.Stale++
				p.dropped.Add(ctx, 1, p.attrs)
				continue
			}
			out = append(out, t)
		}
		p.signal()
	}
	for _, t := range out {
		lag := max(p.version-t.WeightVersion, 0)
		p.stats.MaxLag = max(p.stats.MaxLag, lag)
		p.stats.Lag[min(lag, LagBuckets-1)]++
		p.lag.Record(ctx, lag, p.attrs)
	}
	p.stats.Taken += int64(n)
	p.taken.Add(ctx, int64(n), p.attrs)
	return out, nil
}

// unTake puts back trajectories a batch took before it gave up, oldest
// first, ahead of the rest; p.mu must be held. A batch is all or nothing.
func (p *Pool) unTake(ts []Trajectory) {
	for i := len(ts) - 1; i >= 0; i-- {
		if p.n == p.cap {
			return // only puts after the take could fill it: DropOldest's loss
		}
		p.head = (p.head - 1 + p.cap) % p.cap
		p.items[p.head] = ts[i]
		p.n++
	}
	p.signal()
}

// Accepted is every episode the pool accepted (Dedup): pooled, taken or
// dropped. A restarted rollout worker skips these.
func (p *Pool) Accepted() Ledger {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen.Clone()
}

// Settled is Accepted less the episodes still pooled: what a trainer's
// checkpoint taken now has used (or what was dropped). A loop restored
// from that checkpoint seeds a fresh pool with it, and the rollout
// workers play the rest again.
func (p *Pool) Settled() Ledger {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.seen.Clone()
	for i := range p.n {
		l.Remove(p.items[(p.head+i)%p.cap].Episode)
	}
	return l
}

// SetWeightVersion records the trainer's current weight version (lag is
// measured against it).
func (p *Pool) SetWeightVersion(v int64) {
	p.mu.Lock()
	p.version = v
	p.mu.Unlock()
}

// Stats reports the pool's counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Depth = p.n
	return s
}

// Close wakes every waiter: puts fail, batches take what is left only if
// it is enough.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		p.signal()
	}
}
