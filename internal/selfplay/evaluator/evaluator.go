// Package evaluator puts a user's model in the self-play engine's search.
// The model runs in a process of its own (sdk/python/trainyard/selfplay.py:
// serve(evaluate)) and evaluates batches of positions through shared
// buffers, one short message a batch, like the env server's protocol
// (version 1 below, and in docs/selfplay.md). Batcher gathers the leaf
// evaluations of many concurrent searches into those batches; the built-in
// Go model goes through the same Batcher (FromEvaluator).
package evaluator

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainyard/trainyard/internal/shmem"
)

// Protocol is the version this client speaks.
const Protocol = 1

// Dims are a game's sizes and the largest batch.
type Dims struct {
	ObsDim   int `json:"obs_dim"`
	Actions  int `json:"num_actions"`
	Players  int `json:"num_players"`
	MaxBatch int `json:"max_batch"`
}

func (d Dims) valid() error {
	if d.ObsDim < 1 || d.Actions < 1 || d.Players < 1 || d.MaxBatch < 1 {
		return fmt.Errorf("evaluator: dims %+v: every one must be at least 1", d)
	}
	return nil
}

// BatchEvaluator evaluates n positions: obs holds n rows of ObsDim; it
// writes n rows of Actions logits (unnormalised, over every action) and n
// rows of Players values (values[i] for the player i seats after the mover).
type BatchEvaluator interface {
	Dims() Dims
	EvaluateBatch(n int, obs, logits, values []float32) error
}

// hello is the client's first line.
type hello struct {
	Protocol int `json:"protocol"`
	Dims
	Offsets map[string]int `json:"offsets"`
	Size    int            `json:"size"`
}

// answer is the evaluator's first line.
type answer struct {
	Protocol int    `json:"protocol"`
	Model    string `json:"model"`
	Error    string `json:"error"`
}

// Remote is a connection to an evaluator process. It is safe for concurrent
// use; batches go one at a time.
type Remote struct {
	Model string // the model's name, as the evaluator gave it

	d    Dims
	conn *net.UnixConn
	r    *bufio.Reader
	buf  *shmem.File

	mu                  sync.Mutex
	obs, logits, values []float32
	broken              error
}

var _ BatchEvaluator = (*Remote)(nil)

// Dial connects to the evaluator at socket and hands it buffers for d.
func Dial(ctx context.Context, socket string, d Dims) (*Remote, error) {
	if err := d.valid(); err != nil {
		return nil, err
	}
	var dialer net.Dialer
	c, err := dialer.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("evaluator at %s: %w", socket, err)
	}
	conn := c.(*net.UnixConn)
	offsets, size := shmem.Layout(shmem.Field{Name: "obs", Bytes: 4 * d.MaxBatch * d.ObsDim},
		shmem.Field{Name: "logits", Bytes: 4 * d.MaxBatch * d.Actions}, shmem.Field{Name: "values", Bytes: 4 * d.MaxBatch * d.Players})
	buf, err := shmem.New("trainyard-eval", size)
	if err != nil {
		conn.Close()
		return nil, err
	}
	r := &Remote{d: d, conn: conn, r: bufio.NewReader(conn), buf: buf,
		obs: buf.Float32s(offsets["obs"], d.MaxBatch*d.ObsDim), logits: buf.Float32s(offsets["logits"], d.MaxBatch*d.Actions),
		values: buf.Float32s(offsets["values"], d.MaxBatch*d.Players)}
	fail := func(err error) (*Remote, error) {
		r.Close()
		return nil, fmt.Errorf("evaluator at %s: %w", socket, err)
	}
	msg, _ := json.Marshal(hello{Protocol: Protocol, Dims: d, Offsets: offsets, Size: size})
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
		defer conn.SetDeadline(time.Time{})
	}
	if _, _, err := conn.WriteMsgUnix(append(msg, '\n'), unix.UnixRights(buf.Fd()), nil); err != nil {
		return fail(err)
	}
	line, err := r.r.ReadBytes('\n')
	if err != nil {
		return fail(fmt.Errorf("no answer to the handshake: %w", err))
	}
	var a answer
	if err := json.Unmarshal(line, &a); err != nil {
		return fail(fmt.Errorf("handshake answer %q: %w", strings.TrimSpace(string(line)), err))
	}
	if a.Error != "" {
		return fail(errors.New(a.Error))
	}
	if a.Protocol != Protocol {
		return fail(fmt.Errorf("it speaks protocol %d; this engine speaks %d", a.Protocol, Protocol))
	}
	r.Model = a.Model
	return r, nil
}

func (r *Remote) Dims() Dims { return r.d }

// EvaluateBatch sends n rows of obs and reads back their logits and values.
// After an evaluator error every call fails with it.
func (r *Remote) EvaluateBatch(n int, obs, logits, values []float32) error {
	d := r.d
	if n < 1 || n > d.MaxBatch || len(obs) < n*d.ObsDim || len(logits) < n*d.Actions || len(values) < n*d.Players {
		return fmt.Errorf("evaluator: batch of %d outside 1..%d, or short buffers", n, d.MaxBatch)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken != nil {
		return r.broken
	}
	copy(r.obs, obs[:n*d.ObsDim])
	if _, err := fmt.Fprintf(r.conn, "eval %d\n", n); err != nil {
		r.broken = fmt.Errorf("evaluator %s: %w", r.Model, err)
		return r.broken
	}
	line, err := r.r.ReadString('\n')
	if err != nil {
		r.broken = fmt.Errorf("evaluator %s stopped answering: %w", r.Model, err)
		return r.broken
	}
	if line = strings.TrimSpace(line); line != "ok" {
		r.broken = fmt.Errorf("evaluator %s: %s", r.Model, strings.TrimPrefix(line, "error: "))
		return r.broken
	}
	copy(logits, r.logits[:n*d.Actions])
	copy(values, r.values[:n*d.Players])
	return nil
}

// Close ends the session.
func (r *Remote) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil {
		return nil
	}
	fmt.Fprint(r.conn, "close\n")
	err := r.conn.Close()
	r.conn = nil
	r.buf.Close()
	if r.broken == nil {
		r.broken = errors.New("evaluator: closed")
	}
	return err
}

// Evaluator is the engine's per-position evaluation (engine.Evaluator).
type Evaluator interface {
	Evaluate(obs []float32, legal []bool, priors, values []float32) error
}

// fromEvaluator evaluates a batch row by row with a per-position
// evaluator: the built-in model through the same Batcher. Its priors (all
// actions legal) become logits as their logarithms.
type fromEvaluator struct {
	e     Evaluator
	d     Dims
	legal []bool
	pri   []float32
}

// FromEvaluator makes a per-position evaluator a BatchEvaluator.
func FromEvaluator(e Evaluator, d Dims) BatchEvaluator {
	legal := make([]bool, d.Actions)
	for i := range legal {
		legal[i] = true
	}
	return &fromEvaluator{e: e, d: d, legal: legal, pri: make([]float32, d.Actions)}
}

func (f *fromEvaluator) Dims() Dims { return f.d }

func (f *fromEvaluator) EvaluateBatch(n int, obs, logits, values []float32) error {
	d := f.d
	for i := range n {
		if err := f.e.Evaluate(obs[i*d.ObsDim:(i+1)*d.ObsDim], f.legal, f.pri, values[i*d.Players:(i+1)*d.Players]); err != nil {
			return err
		}
		for a, p := range f.pri {
			logits[i*d.Actions+a] = float32(math.Log(max(float64(p), 1e-30)))
		}
	}
	return nil
}
