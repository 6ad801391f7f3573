package logstream

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/trainyard/trainyard/internal/embedded/s3test"
	"github.com/trainyard/trainyard/internal/objstore"
)

var store *objstore.Store

func TestMain(m *testing.M) {
	os.Exit(s3test.Main(m, "logs", func(s *objstore.Store, _ string) { store = s }))
}

// writes is what a test's process prints: each element one Write, with
// pause after it.
type write struct {
	data  string
	pause time.Duration
}

func lines(n, size int, pause time.Duration) []write {
	var ws []write
	for i := range n {
		l := fmt.Sprintf("line %d ", i)
		ws = append(ws, write{data: l + strings.Repeat("x", max(size-len(l)-1, 0)) + "\n", pause: pause})
	}
	return ws
}

func readAll(t *testing.T, prefix string, from int64) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := (Reader{Store: store, Prefix: prefix}).Copy(context.Background(), &b, from, nil, nil); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestWriterChunksRotatesAndContinues writes through a real Writer to the
// embedded S3 and reads the log back as the API does.
func TestWriterChunksRotatesAndContinues(t *testing.T) {
	cases := []struct {
		name string
		o    Options
		// runs are writers one after another on the same log (a process
		// placed again).
		runs [][]write
		// wantChunksBeforeClose: chunks visible right after the writes,
		// before Close (size-triggered flushes need no tick).
		wantChunksBeforeClose int
		want                  func(all string) string // the log as read from 0
		wantMaxRetained       int64
	}{
		{
			name: "lines flushed each tick, read back whole",
			o:    Options{FlushEvery: 50 * time.Millisecond},
			runs: [][]write{lines(10, 20, 20*time.Millisecond)},
			want: func(all string) string { return all },
		},
		{
			name:                  "a burst is cut at ChunkBytes without waiting for the tick",
			o:                     Options{FlushEvery: time.Hour, ChunkBytes: 1 << 10},
			runs:                  [][]write{{{data: strings.Repeat("a", 3<<10+512)}}},
			wantChunksBeforeClose: 3,
			want:                  func(all string) string { return all },
		},
		{
			name:            "over the cap the oldest chunks go and the reader says so",
			o:               Options{FlushEvery: time.Hour, ChunkBytes: 1 << 10, CapBytes: 2 << 10},
			runs:            [][]write{lines(50, 100, 0)},
			wantMaxRetained: 2 << 10,
			want: func(all string) string {
				// 5,000 bytes: chunks at 0, 1 Ki, 2 Ki, 3 Ki (full) and 4 Ki
				// (904 bytes); the last two fit the cap.
				return "[trainyard: bytes 0-3072 of this log are gone: it keeps the newest chunks up to its size cap]\n" + all[3<<10:]
			},
		},
		{
			name: "a second process continues the log after the first",
			o:    Options{FlushEvery: 50 * time.Millisecond},
			runs: [][]write{lines(3, 10, 0), lines(2, 12, 0)},
			want: func(string) string {
				var first, second string
				for _, w := range lines(3, 10, 0) {
					first += w.data
				}
				for _, w := range lines(2, 12, 0) {
					second += w.data
				}
				return first + "[trainyard: the process started again (run-1)]\n" + second
			},
		},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			prefix := JobPrefix(fmt.Sprintf("job-writer-%d", i), 0)
			var all string
			for r, ws := range c.runs {
				w, err := Open(ctx, store, prefix, fmt.Sprintf("run-%d", r), c.o)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range ws {
					if _, err := w.Write([]byte(x.data)); err != nil {
						t.Fatal(err)
					}
					all += x.data
					time.Sleep(x.pause)
				}
				if c.wantChunksBeforeClose > 0 {
					deadline := time.Now().Add(10 * time.Second)
					for n := 0; n < c.wantChunksBeforeClose; {
						if time.Now().After(deadline) {
							t.Fatalf("%d chunks uploaded, want %d before Close", n, c.wantChunksBeforeClose)
						}
						cs, err := List(ctx, store, prefix, "")
						if err != nil {
							t.Fatal(err)
						}
						n = len(cs)
						time.Sleep(20 * time.Millisecond)
					}
				}
				if err := w.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := readAll(t, prefix, 0), c.want(all); got != want {
				t.Errorf("log:\n%q\nwant:\n%q", got, want)
			}
			cs, err := List(ctx, store, prefix, "")
			if err != nil {
				t.Fatal(err)
			}
			var retained int64
			for j, ch := range cs {
				retained += ch.Size
				if ch.Size > int64(max(c.o.ChunkBytes, DefaultChunkBytes)) {
					t.Errorf("chunk %s has %d bytes", ch.Key, ch.Size)
				}
				if j > 0 && ch.Offset != cs[j-1].End() {
					t.Errorf("chunk %s starts at %d, the one before ends at %d", ch.Key, ch.Offset, cs[j-1].End())
				}
			}
			if c.wantMaxRetained > 0 && retained > c.wantMaxRetained {
				t.Errorf("log keeps %d bytes, cap %d", retained, c.wantMaxRetained)
			}
			// Reading from a position gives the same bytes from there.
			if len(cs) > 0 {
				mid := cs[len(cs)-1].Offset + cs[len(cs)-1].Size/2
				full := readAll(t, prefix, 0)
				if got := readAll(t, prefix, mid); !strings.HasSuffix(full, got) || int64(len(got)) != cs[len(cs)-1].End()-mid {
					t.Errorf("from %d: %q is not the log's last %d bytes", mid, got, cs[len(cs)-1].End()-mid)
				}
			}
		})
	}
}

// TestFollowSeesEachLineWithinAFlush: a reader following the log while a
// process prints a line every 150 ms gets each line within a flush
// interval plus a poll, and stops once the writer is done.
func TestFollowSeesEachLineWithinAFlush(t *testing.T) {
	ctx := context.Background()
	prefix := RunPrefix("run-follow")
	const every, poll = 200 * time.Millisecond, 50 * time.Millisecond
	w, err := Open(ctx, store, prefix, "1", Options{FlushEvery: every})
	if err != nil {
		t.Fatal(err)
	}
	var ended atomic.Bool
	printed := map[string]time.Time{}
	var mu sync.Mutex
	out := &timedWriter{seen: map[string]time.Time{}}
	done := make(chan error, 1)
	go func() {
		_, err := Reader{Store: store, Prefix: prefix, Poll: poll}.Copy(ctx, out, 0, func() {},
			func(context.Context) (bool, error) { return ended.Load(), nil })
		done <- err
	}()
	for i := range 10 {
		l := fmt.Sprintf("line %d\n", i)
		mu.Lock()
		printed[l] = time.Now()
		mu.Unlock()
		_, _ = w.Write([]byte(l))
		time.Sleep(150 * time.Millisecond)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ended.Store(true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end after the writer closed")
	}
	var worst time.Duration
	for l, at := range printed {
		got, ok := out.at(l)
		if !ok {
			t.Fatalf("line %q never followed; got %q", l, out.String())
		}
		worst = max(worst, got.Sub(at))
	}
	t.Logf("worst line latency %v (flush every %v, poll %v)", worst, every, poll)
	if limit := every + poll + 3*time.Second; worst > limit { // margin for -race on a loaded machine
		t.Errorf("a line took %v to be followed, want <= %v", worst, limit)
	}
}

// timedWriter records when each line arrived.
type timedWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	part string
	seen map[string]time.Time
}

func (t *timedWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	s := t.part + string(p)
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		t.seen[s[:i+1]] = time.Now()
		s = s[i+1:]
	}
	t.part = s
	return len(p), nil
}

func (t *timedWriter) at(l string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.seen[l]
	return at, ok
}

func (t *timedWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// TestWriterWithS3Down: writes never block or fail when S3 is gone, what
// does not fit is dropped, and Close says what was not uploaded.
func TestWriterWithS3Down(t *testing.T) {
	cl, err := minio.New("127.0.0.1:1", &minio.Options{Creds: credentials.NewStaticV4("a", "b", ""), MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	down := &objstore.Store{Client: cl, Bucket: "logs"}
	if _, err := Open(context.Background(), down, JobPrefix("job-down", 0), "1", Options{}); err == nil {
		t.Fatal("Open with S3 down: no error")
	}
	// Opened while S3 was up, then it went away: build the writer by hand.
	w := &Writer{store: down, prefix: JobPrefix("job-down", 0), name: "1", o: Options{FlushEvery: 20 * time.Millisecond, PendingBytes: 100}.withDefaults(),
		kick: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	start := time.Now()
	for range 50 {
		if n, err := w.Write([]byte("0123456789")); n != 10 || err != nil {
			t.Fatalf("Write: %d, %v", n, err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("50 writes with S3 down took %v", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = w.Close(ctx)
	if err == nil || !strings.Contains(err.Error(), "not uploaded") {
		t.Fatalf("Close with S3 down: %v", err)
	}
	if len(w.buf) > 100+200 {
		t.Errorf("pending grew to %d bytes, cap 100 (+ the dropped notice)", len(w.buf))
	}
}
