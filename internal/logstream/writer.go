package logstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/internal/objstore"
)

// Defaults of a Writer's limits.
const (
	DefaultFlushEvery = time.Second
	DefaultChunkBytes = 64 << 10
	DefaultCapBytes   = 64 << 20
	// DefaultPendingBytes bounds what waits for upload (S3 slow or
	// unreachable); output beyond it is dropped, and the log says so.
	DefaultPendingBytes = 8 << 20
)

// Options are a Writer's limits; zero fields take the defaults.
type Options struct {
	FlushEvery   time.Duration
	ChunkBytes   int
	CapBytes     int64
	PendingBytes int
	// OnError, when set, hears about uploads and deletions that failed
	// (they are retried at the next flush).
	OnError func(error)
}

func (o Options) withDefaults() Options {
	if o.FlushEvery <= 0 {
		o.FlushEvery = DefaultFlushEvery
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.CapBytes <= 0 {
		o.CapBytes = DefaultCapBytes
	}
	if o.PendingBytes <= 0 {
		o.PendingBytes = DefaultPendingBytes
	}
	if o.OnError == nil {
		o.OnError = func(error) {}
	}
	return o
}

// Writer is an io.Writer that uploads what is written to it under a log's
// prefix, a chunk at a time: whatever is pending every FlushEvery, and at
// once whenever ChunkBytes are pending. Write never waits for S3. Close
// uploads the rest.
type Writer struct {
	store  *objstore.Store
	prefix string
	name   string
	o      Options

	mu      sync.Mutex
	buf     []byte
	dropped int64 // bytes refused since the last flush (pending full)
	off     int64 // log position of buf[0]
	err     error // last upload error, nil after a success

	chunks   []Chunk // what the log holds, oldest first (earlier writers' too)
	retained int64

	kick    chan struct{}
	closing chan struct{}
	done    chan struct{}
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Open starts a Writer for the log under prefix, continuing after what
// earlier writers of the same log left there; name tells this writer's
// chunks apart from theirs (an activity id). When the log is not empty, a
// line saying the process started again comes first.
func Open(ctx context.Context, store *objstore.Store, prefix, name string, o Options) (*Writer, error) {
	w := &Writer{store: store, prefix: prefix, name: unsafeName.ReplaceAllString(name, "_"), o: o.withDefaults(),
		kick: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{})}
	if w.name == "" {
		w.name = "0"
	}
	chunks, err := List(ctx, store, prefix, "")
	if err != nil {
		return nil, err
	}
	w.chunks = chunks
	for _, c := range chunks {
		w.retained += c.Size
		w.off = max(w.off, c.End())
	}
	if w.off > 0 {
		w.buf = fmt.Appendf(nil, "[trainyard: the process started again (%s)]\n", w.name)
	}
	go w.loop()
	return w, nil
}

// Write queues p for upload; it never blocks on S3 and never fails. What
// does not fit in PendingBytes is dropped (and counted in the log).
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	room := w.o.PendingBytes - len(w.buf)
	take := min(max(room, 0), len(p))
	w.buf = append(w.buf, p[:take]...)
	w.dropped += int64(len(p) - take)
	full := len(w.buf) >= w.o.ChunkBytes
	w.mu.Unlock()
	if full {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// Close uploads what is pending and stops the Writer; it waits at most
// until ctx ends, and returns the last upload error when something could
// not be uploaded.
func (w *Writer) Close(ctx context.Context) error {
	select {
	case <-w.closing:
	default:
		close(w.closing)
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		return fmt.Errorf("log %s: close: %w", w.prefix, ctx.Err())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 || w.dropped > 0 {
		return fmt.Errorf("log %s: %d bytes not uploaded: %w", w.prefix, len(w.buf), w.err)
	}
	return nil
}

func (w *Writer) loop() {
	defer close(w.done)
	tick := time.NewTicker(w.o.FlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-w.kick:
			w.flush(false)
		case <-tick.C:
			w.flush(true)
		case <-w.closing:
			// A few tries: S3 may be restarting.
			for i := 0; i < 5 && !w.flush(true); i++ {
				time.Sleep(time.Duration(i+1) * 200 * time.Millisecond)
			}
			return
		}
	}
}

// flush uploads full chunks, and with all the partial one too; it reports
// whether everything it meant to upload went up.
func (w *Writer) flush(all bool) bool {
	for {
		w.mu.Lock()
		if w.dropped > 0 {
			// Said where it happened, so a reader knows output is missing.
			w.buf = fmt.Appendf(w.buf, "\n[trainyard: %d bytes of output dropped: uploads fell behind]\n", w.dropped)
			w.dropped = 0
		}
		n := min(len(w.buf), w.o.ChunkBytes)
		if n == 0 || (!all && n < w.o.ChunkBytes) {
			w.mu.Unlock()
			return true
		}
		data, off := bytes.Clone(w.buf[:n]), w.off
		w.mu.Unlock()

		key := chunkKey(w.prefix, off, w.name)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := w.store.Client.PutObject(ctx, w.store.Bucket, key, bytes.NewReader(data), int64(n),
			minio.PutObjectOptions{ContentType: "text/plain; charset=utf-8"})
		cancel()
		w.mu.Lock()
		if err != nil {
			w.err = fmt.Errorf("log %s: upload %s: %w", w.prefix, key, err)
			w.mu.Unlock()
			w.o.OnError(w.err)
			return false
		}
		w.err = nil
		w.buf = w.buf[n:]
		w.off += int64(n)
		w.chunks = append(w.chunks, Chunk{Key: key, Offset: off, Size: int64(n)})
		w.retained += int64(n)
		w.mu.Unlock()
		w.rotate()
	}
}

// rotate deletes the oldest chunks while the log is over its cap (the
// newest chunk always stays).
func (w *Writer) rotate() {
	for {
		w.mu.Lock()
		if w.retained <= w.o.CapBytes || len(w.chunks) < 2 {
			w.mu.Unlock()
			return
		}
		c := w.chunks[0]
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := w.store.Client.RemoveObject(ctx, w.store.Bucket, c.Key, minio.RemoveObjectOptions{})
		cancel()
		if err != nil && minio.ToErrorResponse(err).Code != "NoSuchKey" {
			w.o.OnError(fmt.Errorf("log %s: rotate: delete %s: %w", w.prefix, c.Key, err))
			return
		}
		w.mu.Lock()
		w.chunks = w.chunks[1:]
		w.retained -= c.Size
		w.mu.Unlock()
	}
}

// List returns the log's chunks after the key after ("" for all), in log
// order.
func List(ctx context.Context, store *objstore.Store, prefix, after string) ([]Chunk, error) {
	var out []Chunk
	for o := range store.Client.ListObjects(ctx, store.Bucket, minio.ListObjectsOptions{Prefix: prefix, StartAfter: after}) {
		if o.Err != nil {
			return nil, fmt.Errorf("log %s: list: %w", prefix, o.Err)
		}
		if off, ok := parseChunk(o.Key); ok {
			out = append(out, Chunk{Key: o.Key, Offset: off, Size: o.Size})
		}
	}
	return out, nil
}

// errGone: a chunk listed a moment ago was deleted by rotation.
var errGone = errors.New("chunk deleted")

// Warner is where Tee reports a log it could not keep (a Temporal
// activity's logger, slog).
type Warner interface {
	Warn(msg string, keyvals ...any)
}

// Tee is w and, when store is set, the log under prefix: what a process
// prints goes to both. The process runs whether or not its log can be
// kept, so failures are warnings. stop uploads the rest (for at most 30 s)
// and must be called once the process's output is closed.
func Tee(ctx context.Context, store *objstore.Store, prefix, name string, w io.Writer, log Warner) (out io.Writer, stop func()) {
	if store == nil {
		return w, func() {}
	}
	lw, err := Open(ctx, store, prefix, name, Options{OnError: func(err error) { log.Warn("process log upload failed; retrying", "err", err) }})
	if err != nil {
		log.Warn("process log not kept", "log", prefix, "err", err)
		return w, func() {}
	}
	return io.MultiWriter(w, lw), func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := lw.Close(ctx); err != nil {
			log.Warn("process log incomplete", "log", prefix, "err", err)
		}
	}
}
