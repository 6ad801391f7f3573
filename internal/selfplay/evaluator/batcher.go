package evaluator

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Batcher is the Evaluator of many searches at once (one goroutine per
// game, each between Join and Leave): an Evaluate call waits until its
// position goes in a batch. A batch goes when MaxBatch positions wait, when
// every joined search waits (so G games in flight give batches of G), or
// when the oldest has waited MaxWait (a search that is slow to come back).
// A GPU model then sees batches of hundreds, not one position a call.
type Batcher struct {
	eval    BatchEvaluator
	d       Dims
	maxWait time.Duration

	mu       sync.Mutex
	active   int
	queue    []*request
	flushing bool

	obs, logits, values []float32 // the batch, used by the one flushing

	batches, positions atomic.Int64
}

type request struct {
	obs           []float32
	legal         []bool
	priors, value []float32
	done          chan error
}

// NewBatcher batches for e; maxWait bounds how long a position waits for
// company (default 2 ms).
func NewBatcher(e BatchEvaluator, maxWait time.Duration) *Batcher {
	if maxWait <= 0 {
		maxWait = 2 * time.Millisecond
	}
	d := e.Dims()
	return &Batcher{eval: e, d: d, maxWait: maxWait,
		obs: make([]float32, d.MaxBatch*d.ObsDim), logits: make([]float32, d.MaxBatch*d.Actions), values: make([]float32, d.MaxBatch*d.Players)}
}

// Join counts a search in: batches wait for it. Each Join needs a Leave.
func (b *Batcher) Join() {
	b.mu.Lock()
	b.active++
	b.mu.Unlock()
}

// Leave counts a search out; the others no longer wait for it.
func (b *Batcher) Leave() {
	b.mu.Lock()
	b.active--
	b.flushLocked(false)
	b.mu.Unlock()
}

// Stats are the batches sent and the positions in them.
func (b *Batcher) Stats() (batches, positions int64) { return b.batches.Load(), b.positions.Load() }

// Evaluate is engine.Evaluator's: priors are the softmax of the model's
// logits over the legal actions; values are the model's.
func (b *Batcher) Evaluate(obs []float32, legal []bool, priors, values []float32) error {
	if len(obs) != b.d.ObsDim || len(legal) != b.d.Actions || len(priors) != b.d.Actions || len(values) != b.d.Players {
		return fmt.Errorf("evaluator: position of %d obs, %d actions, %d values; the model takes %d, %d, %d",
			len(obs), len(legal), len(values), b.d.ObsDim, b.d.Actions, b.d.Players)
	}
	r := &request{obs: obs, legal: legal, priors: priors, value: values, done: make(chan error, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, r)
	b.flushLocked(false)
	b.mu.Unlock()
	t := time.NewTimer(b.maxWait)
	defer t.Stop()
	for {
		select {
		case err := <-r.done:
			return err
		case <-t.C:
			b.mu.Lock()
			b.flushLocked(true)
			b.mu.Unlock()
			t.Reset(b.maxWait)
		}
	}
}

// flushLocked sends batches while one is due (any waiting position when
// force) and no other goroutine is sending; it drops b.mu while the model
// works.
func (b *Batcher) flushLocked(force bool) {
	for !b.flushing && len(b.queue) > 0 && (force || len(b.queue) >= b.d.MaxBatch || len(b.queue) >= b.active) {
		n := min(len(b.queue), b.d.MaxBatch)
		batch := b.queue[:n:n]
		b.queue = append([]*request(nil), b.queue[n:]...)
		b.flushing = true
		b.mu.Unlock()
		b.send(batch)
		b.mu.Lock()
		b.flushing = false
		force = false
	}
}

func (b *Batcher) send(batch []*request) {
	d := b.d
	for i, r := range batch {
		copy(b.obs[i*d.ObsDim:], r.obs)
	}
	err := b.eval.EvaluateBatch(len(batch), b.obs, b.logits, b.values)
	b.batches.Add(1)
	b.positions.Add(int64(len(batch)))
	for i, r := range batch {
		if err == nil {
			softmaxLegal(b.logits[i*d.Actions:(i+1)*d.Actions], r.legal, r.priors)
			copy(r.value, b.values[i*d.Players:(i+1)*d.Players])
		}
		r.done <- err
	}
}

// softmaxLegal writes the softmax of logits over the legal actions into
// priors (0 on illegal ones). Non-finite logits count as very unlikely.
func softmaxLegal(logits []float32, legal []bool, priors []float32) {
	hi := math.Inf(-1)
	for a, ok := range legal {
		if ok && finite(logits[a]) && float64(logits[a]) > hi {
			hi = float64(logits[a])
		}
	}
	var z float64
	n := 0
	for a, ok := range legal {
		priors[a] = 0
		if !ok {
			continue
		}
		n++
		if finite(logits[a]) {
			e := math.Exp(float64(logits[a]) - hi)
			priors[a] = float32(e)
			z += e
		}
	}
	if z == 0 { // every legal logit non-finite: uniform over the legal moves
		for a, ok := range legal {
			if ok {
				priors[a] = 1 / float32(n)
			}
		}
		return
	}
	for a := range priors {
		priors[a] = float32(float64(priors[a]) / z)
	}
}

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }
