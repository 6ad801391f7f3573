package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/internal/embedded/s3test"
	"github.com/trainyard/trainyard/internal/objstore"
)

// One embedded gateway per process (versitygw keeps globals); every test
// isolates itself with its own key prefix.
var (
	bucket  *objstore.Store
	tmpDir  string // on the same disk as the S3 server's data
	prefixN atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(s3test.Main(m, "ckpt-test", func(s *objstore.Store, dir string) { bucket, tmpDir = s, dir }))
}

const testChunk = 64 << 10

func newStore(t testing.TB) *Store {
	return New(bucket, Options{Prefix: fmt.Sprintf("t%d", prefixN.Add(1)), ChunkSize: testChunk, Parallel: 3})
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func readers(files map[string][]byte) map[string]io.Reader {
	out := map[string]io.Reader{}
	for k, v := range files {
		out[k] = bytes.NewReader(v)
	}
	return out
}

func checkDir(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	got := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		got[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("restored %d files, want %d", len(got), len(want))
	}
	for p, w := range want {
		if !bytes.Equal(got[p], w) {
			t.Errorf("file %s: restored %d bytes differ from the %d saved", p, len(got[p]), len(w))
		}
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name  string
		files map[string][]byte
	}{
		{"mixed", map[string][]byte{
			"empty.bin":           {},
			"unaligned.bin":       randBytes(1, 3*testChunk+123),
			"aligned.bin":         randBytes(2, 2*testChunk),
			"nested/dir/meta.txt": []byte("iteration 7\n"),
		}},
		{"repeated chunks", map[string][]byte{
			"zeros.bin": make([]byte, 5*testChunk+1), // the same chunk 5 times
			"copy.bin":  make([]byte, testChunk),
		}},
		{"only empty", map[string][]byte{"a": {}}},
		{"no files", map[string][]byte{}},
	}
	for _, tc := range tests {
		for _, viaDir := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/dir=%v", tc.name, viaDir), func(t *testing.T) {
				s := newStore(t)
				meta := Meta{Iteration: 7, Metrics: map[string]float64{"mean_return": 480.5}, Labels: map[string]string{"algo": "ppo"}}
				var m Manifest
				var st Stats
				var err error
				if viaDir {
					src := t.TempDir()
					for p, b := range tc.files {
						dst := filepath.Join(src, filepath.FromSlash(p))
						os.MkdirAll(filepath.Dir(dst), 0o755)
						if err := os.WriteFile(dst, b, 0o600); err != nil {
							t.Fatal(err)
						}
					}
					m, st, err = s.SaveDir(ctx, "run-1", src, meta)
				} else {
					m, st, err = s.Save(ctx, "run-1", readers(tc.files), meta)
				}
				if err != nil {
					t.Fatal(err)
				}
				var total int64
				distinct := map[string]bool{}
				for _, f := range m.Files {
					for _, c := range f.Chunks {
						distinct[c.SHA256] = true
					}
				}
				for _, b := range tc.files {
					total += int64(len(b))
				}
				if st.BytesTotal != total || m.Size() != total || st.ChunksUploaded != len(distinct) {
					t.Errorf("stats %+v, manifest size %d; want %d bytes, %d distinct chunks uploaded", st, m.Size(), total, len(distinct))
				}
				if m.Seq != 1 || m.Meta.Iteration != 7 || m.Meta.Metrics["mean_return"] != 480.5 {
					t.Errorf("manifest %+v", m)
				}
				// The layout is plain S3: the manifest sits at the documented key.
				if _, err := bucket.Client.StatObject(ctx, bucket.Bucket, s.opts.Prefix+"/runs/run-1/0000000001/manifest.json", minio.StatObjectOptions{}); err != nil {
					t.Fatalf("manifest not at documented key: %v", err)
				}
				latest, err := s.Latest(ctx, "run-1")
				if err != nil || latest.Seq != 1 || len(latest.Files) != len(tc.files) {
					t.Fatalf("Latest = %+v, %v", latest, err)
				}
				dst := t.TempDir()
				if err := s.Restore(ctx, "run-1", 1, dst); err != nil {
					t.Fatal(err)
				}
				checkDir(t, dst, tc.files)
				if viaDir && len(tc.files) > 0 {
					info, err := os.Stat(filepath.Join(dst, filepath.FromSlash(m.Files[0].Path)))
					if err != nil || info.Mode().Perm() != 0o600 {
						t.Errorf("mode not restored: %v %v", info.Mode(), err)
					}
				}
			})
		}
	}
}

func TestSecondSaveUploadsOnlyChanges(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name        string
		mutate      func(b []byte) // applied to a 20-chunk file
		maxUploaded float64        // fraction of BytesTotal
	}{
		{"unchanged", func([]byte) {}, 0},
		{"10% contiguous", func(b []byte) { copy(b[5*testChunk+100:], randBytes(9, len(b)/10)) }, 0.16},
		{"one byte", func(b []byte) { b[len(b)/2] ^= 1 }, 0.06},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			base := randBytes(3, 20*testChunk)
			if _, st, err := s.Save(ctx, "r", map[string]io.Reader{"model.bin": bytes.NewReader(base)}, Meta{}); err != nil || st.BytesUploaded != int64(len(base)) {
				t.Fatalf("first save: %+v %v", st, err)
			}
			next := slices.Clone(base)
			tc.mutate(next)
			m, st, err := s.Save(ctx, "r", map[string]io.Reader{"model.bin": bytes.NewReader(next)}, Meta{})
			if err != nil {
				t.Fatal(err)
			}
			if frac := float64(st.BytesUploaded) / float64(st.BytesTotal); frac > tc.maxUploaded {
				t.Errorf("uploaded %d of %d bytes (%.1f%%), want ≤ %.0f%%", st.BytesUploaded, st.BytesTotal, 100*frac, 100*tc.maxUploaded)
			}
			dst := t.TempDir()
			if err := s.Restore(ctx, "r", m.Seq, dst); err != nil {
				t.Fatal(err)
			}
			checkDir(t, dst, map[string][]byte{"model.bin": next})
		})
	}
}

func TestRestoreDetectsDamage(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name    string
		damage  func(t *testing.T, key string, size int64)
		wantErr error
	}{
		{"overwritten", func(t *testing.T, key string, size int64) {
			other := randBytes(77, int(size))
			if _, err := bucket.Client.PutObject(ctx, bucket.Bucket, key, bytes.NewReader(other), size, minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}, ErrChecksum},
		{"truncated", func(t *testing.T, key string, size int64) {
			if _, err := bucket.Client.PutObject(ctx, bucket.Bucket, key, bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}, ErrChecksum},
		{"missing", func(t *testing.T, key string, size int64) {
			if err := bucket.Client.RemoveObject(ctx, bucket.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}, ErrMissingChunk},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			files := map[string][]byte{"weights.bin": randBytes(4, 4*testChunk+5), "opt.bin": randBytes(5, testChunk)}
			m, _, err := s.Save(ctx, "run-x", readers(files), Meta{})
			if err != nil {
				t.Fatal(err)
			}
			var victim File
			for _, f := range m.Files {
				if f.Path == "weights.bin" {
					victim = f
				}
			}
			c := victim.Chunks[2]
			tc.damage(t, s.ChunkKey(c.SHA256), c.Size)
			dst := t.TempDir()
			err = s.Restore(ctx, "run-x", m.Seq, dst)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Restore error %v, want %v", err, tc.wantErr)
			}
			for _, want := range []string{"run-x/1", "weights.bin", "chunk 2", c.SHA256} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			if _, err := os.Stat(filepath.Join(dst, "weights.bin")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("damaged file left under its real name: %v", err)
			}
			if ents, _ := os.ReadDir(dst); len(ents) > 0 {
				t.Errorf("restore left files behind: %v", ents)
			}
		})
	}
}

func TestManifestFileMismatch(t *testing.T) {
	// Chunks all verify but the manifest's file hash disagrees: caught by
	// the whole-file check.
	ctx := t.Context()
	s := newStore(t)
	m, _, err := s.Save(ctx, "r", map[string]io.Reader{"a": bytes.NewReader(randBytes(6, testChunk+1))}, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	m.Files[0].SHA256 = strings.Repeat("0", 64)
	err = s.RestoreManifest(ctx, m, t.TempDir())
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "file a") {
		t.Fatalf("got %v, want ErrChecksum naming file a", err)
	}
}

type failingReader struct {
	r     io.Reader
	after int
	n     int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n >= f.after {
		return 0, errors.New("disk on fire")
	}
	p = p[:min(len(p), f.after-f.n)]
	n, err := f.r.Read(p)
	f.n += n
	return n, err
}

func TestHalfWrittenCheckpointIsInvisible(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	data := randBytes(7, 8*testChunk)
	_, _, err := s.Save(ctx, "r", map[string]io.Reader{"m": &failingReader{r: bytes.NewReader(data), after: 5 * testChunk}}, Meta{})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Save error %v", err)
	}
	var chunks int
	for o := range bucket.Client.ListObjects(ctx, bucket.Bucket, minio.ListObjectsOptions{Prefix: s.opts.Prefix + "/chunks/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		chunks++
	}
	if chunks == 0 {
		t.Fatal("no chunks uploaded before the failure; the test proves nothing")
	}
	if ms, err := s.List(ctx, "r"); err != nil || len(ms) != 0 {
		t.Fatalf("List = %d checkpoints, %v; want none", len(ms), err)
	}
	if _, err := s.Latest(ctx, "r"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Latest error %v, want ErrNotFound", err)
	}
	// The next save reuses the orphan chunks: boundaries depend on content
	// only, so the chunks cut before the failure are cut again the same.
	m, st, err := s.Save(ctx, "r", map[string]io.Reader{"m": bytes.NewReader(data)}, Meta{})
	if err != nil || m.Seq != 1 || st.ChunksUploaded != st.ChunksTotal-chunks {
		t.Fatalf("retry: seq %d, %+v, %v; want seq 1 uploading %d chunks", m.Seq, st, err, st.ChunksTotal-chunks)
	}
}

func TestPrune(t *testing.T) {
	ctx := t.Context()
	returns := []float64{10, 50, 400, 90, 300, 200} // seq 1..6
	tests := []struct {
		name     string
		r        Retention
		wantKept []int64
	}{
		{"last 2", Retention{KeepLast: 2}, []int64{5, 6}},
		{"last 2 and best", Retention{KeepLast: 2, KeepBestBy: "mean_return", HigherIsBetter: true}, []int64{3, 5, 6}},
		{"best loss (lower)", Retention{KeepLast: 1, KeepBestBy: "mean_return"}, []int64{1, 6}},
		{"best already among last", Retention{KeepLast: 4, KeepBestBy: "mean_return", HigherIsBetter: true}, []int64{3, 4, 5, 6}},
		{"best and the newest", Retention{KeepBestBy: "mean_return", HigherIsBetter: true}, []int64{3, 6}},
		{"unknown metric", Retention{KeepLast: 1, KeepBestBy: "nope"}, []int64{6}},
		{"more than exist", Retention{KeepLast: 10}, []int64{1, 2, 3, 4, 5, 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			for i, ret := range returns {
				_, _, err := s.Save(ctx, "r", map[string]io.Reader{"w": bytes.NewReader(randBytes(uint64(i), 100))},
					Meta{Iteration: int64(i), Metrics: map[string]float64{"mean_return": ret}})
				if err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Prune(ctx, "r", tc.r); err != nil {
				t.Fatal(err)
			}
			ms, err := s.List(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			var kept []int64
			for _, m := range ms {
				kept = append(kept, m.Seq)
			}
			if !slices.Equal(kept, tc.wantKept) {
				t.Errorf("kept %v, want %v", kept, tc.wantKept)
			}
			// Sequence numbers keep growing after a prune.
			m, _, err := s.Save(ctx, "r", map[string]io.Reader{}, Meta{})
			if err != nil || m.Seq != 7 {
				t.Errorf("save after prune: seq %d, %v", m.Seq, err)
			}
		})
	}
	if _, err := newStore(t).Prune(ctx, "r", Retention{}); err == nil {
		t.Error("a retention keeping nothing was accepted")
	}
}

func TestCollectGarbage(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	shared := randBytes(8, testChunk)
	old := append(slices.Clone(shared), randBytes(9, testChunk)...)
	cur := append(slices.Clone(shared), randBytes(10, testChunk)...)
	var ms [2]Manifest
	for i, b := range [][]byte{old, cur} {
		m, _, err := s.Save(ctx, "r", map[string]io.Reader{"w": bytes.NewReader(b)}, Meta{})
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	// Content-defined boundaries: which chunks the two share depends on
	// the bytes, so the expected counts come from the manifests.
	kept := map[string]bool{}
	for _, c := range ms[1].Files[0].Chunks {
		kept[c.SHA256] = true
	}
	garbage, garbageBytes := map[string]bool{}, int64(0)
	for _, c := range ms[0].Files[0].Chunks {
		if !kept[c.SHA256] && !garbage[c.SHA256] {
			garbage[c.SHA256] = true
			garbageBytes += c.Size
		}
	}
	if len(garbage) == 0 {
		t.Fatal("the old checkpoint has no chunk of its own; the test proves nothing")
	}
	if _, err := s.Prune(ctx, "r", Retention{KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	// A long grace keeps everything.
	if st, err := s.CollectGarbage(ctx, time.Hour); err != nil || st.ChunksDeleted != 0 {
		t.Fatalf("gc with grace: %+v %v", st, err)
	}
	st, err := s.CollectGarbage(ctx, 0)
	if err != nil || st.ChunksDeleted != len(garbage) || st.ChunksKept != len(kept) || st.BytesDeleted != garbageBytes {
		t.Fatalf("gc: %+v %v; want %d chunks (%d bytes) deleted, %d kept", st, err, len(garbage), garbageBytes, len(kept))
	}
	dst := t.TempDir()
	if err := s.Restore(ctx, "r", 2, dst); err != nil {
		t.Fatal(err)
	}
	checkDir(t, dst, map[string][]byte{"w": cur})
}

func TestRejectsBadNames(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	tests := []struct {
		run, path string
	}{
		{"", "a"},
		{"a/b", "a"},
		{"../x", "a"},
		{"ok", "../escape"},
		{"ok", "/abs"},
		{"ok", "a//b"},
		{"ok", ""},
	}
	for _, tc := range tests {
		_, _, err := s.Save(ctx, tc.run, map[string]io.Reader{tc.path: strings.NewReader("x")}, Meta{})
		if err == nil {
			t.Errorf("Save(run %q, file %q) accepted", tc.run, tc.path)
		}
	}
	if _, err := s.Latest(ctx, "never-saved"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Latest of empty run: %v", err)
	}
	if err := s.Restore(ctx, "never-saved", 3, t.TempDir()); !errors.Is(err, ErrNotFound) {
		t.Errorf("Restore of missing checkpoint: %v", err)
	}
}
