package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
)

// source is one file to checkpoint.
type source struct {
	path string
	mode uint32
	open func() (io.ReadCloser, error)
}

// Save stores the given files (slash-separated relative path → content) as
// the run's next checkpoint. The readers are read once, in path order.
func (s *Store) Save(ctx context.Context, run string, files map[string]io.Reader, meta Meta) (Manifest, Stats, error) {
	srcs := make([]source, 0, len(files))
	for p, r := range files {
		srcs = append(srcs, source{path: p, open: func() (io.ReadCloser, error) { return io.NopCloser(r), nil }})
	}
	return s.save(ctx, run, srcs, meta)
}

// SaveDir stores every regular file under dir (recursively) as the run's
// next checkpoint. Symlinks and other special files are skipped.
func (s *Store) SaveDir(ctx context.Context, run, dir string, meta Meta) (Manifest, Stats, error) {
	var srcs []source
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		srcs = append(srcs, source{
			path: filepath.ToSlash(rel),
			mode: uint32(info.Mode().Perm()),
			open: func() (io.ReadCloser, error) { return os.Open(p) },
		})
		return nil
	})
	if err != nil {
		return Manifest{}, Stats{}, fmt.Errorf("checkpoint run %s: scan %s: %w", run, dir, err)
	}
	return s.save(ctx, run, srcs, meta)
}

type chunkJob struct {
	sum string
	buf []byte
}

func (s *Store) save(ctx context.Context, run string, srcs []source, meta Meta) (Manifest, Stats, error) {
	var st Stats
	if err := checkRun(run); err != nil {
		return Manifest{}, st, err
	}
	for _, src := range srcs {
		if err := checkPath(src.path); err != nil {
			return Manifest{}, st, fmt.Errorf("checkpoint run %s: %w", run, err)
		}
	}
	sort.Slice(srcs, func(i, j int) bool { return srcs[i].path < srcs[j].path })
	for i := 1; i < len(srcs); i++ {
		if srcs[i].path == srcs[i-1].path {
			return Manifest{}, st, fmt.Errorf("checkpoint run %s: file %s given twice", run, srcs[i].path)
		}
	}
	seqs, err := s.seqs(ctx, run)
	if err != nil {
		return Manifest{}, st, err
	}
	seq := int64(1)
	if len(seqs) > 0 {
		seq = seqs[len(seqs)-1] + 1
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	// Parallel+1 buffers: the workers each hold one while the reader fills
	// the next, so memory stays bounded whatever the checkpoint's size.
	pool := make(chan []byte, s.opts.Parallel+1)
	for range cap(pool) {
		pool <- make([]byte, s.opts.ChunkSize)
	}
	jobs := make(chan chunkJob)
	var bytesUp, chunksUp atomic.Int64
	var wg sync.WaitGroup
	for range s.opts.Parallel {
		wg.Go(func() {
			for j := range jobs {
				sent, err := s.putChunk(ctx, j.sum, j.buf)
				if err != nil {
					cancel(fmt.Errorf("checkpoint %s/%d: upload chunk %s: %w", run, seq, j.sum, err))
				} else if sent {
					bytesUp.Add(int64(len(j.buf)))
					chunksUp.Add(1)
				}
				pool <- j.buf[:cap(j.buf)]
			}
		})
	}

	m := Manifest{Version: ManifestVersion, Run: run, Seq: seq, Created: time.Now().UTC(), ChunkSize: s.opts.ChunkSize, Meta: meta}
	seen := map[string]bool{} // chunks already queued by this save
	readErr := func() error {
		for _, src := range srcs {
			f := File{Path: src.path, Mode: src.mode, Chunks: []Chunk{}}
			whole := sha256.New()
			rc, err := src.open()
			if err != nil {
				return fmt.Errorf("checkpoint %s/%d: open %s: %w", run, seq, src.path, err)
			}
			err = s.chunkFile(ctx, rc, &f, whole, pool, jobs, seen)
			rc.Close()
			if err != nil {
				return fmt.Errorf("checkpoint %s/%d: read %s: %w", run, seq, src.path, err)
			}
			f.SHA256 = hex.EncodeToString(whole.Sum(nil))
			m.Files = append(m.Files, f)
			st.BytesTotal += f.Size
			st.ChunksTotal += len(f.Chunks)
		}
		return nil
	}()
	close(jobs)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil {
		return Manifest{}, st, cause
	}
	if readErr != nil {
		return Manifest{}, st, readErr
	}
	st.BytesUploaded, st.ChunksUploaded = bytesUp.Load(), int(chunksUp.Load())
	// Last: only now does the checkpoint become visible.
	if err := s.putManifest(ctx, m); err != nil {
		return Manifest{}, st, err
	}
	return m, st, nil
}

// chunkFile cuts one file into chunks, hashing as it goes, and queues the
// chunks this save has not queued yet.
func (s *Store) chunkFile(ctx context.Context, r io.Reader, f *File, whole hash.Hash, pool chan []byte, jobs chan<- chunkJob, seen map[string]bool) error {
	for {
		var buf []byte
		select {
		case buf = <-pool:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		n, err := io.ReadFull(r, buf)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = io.EOF
		} else if err != nil {
			pool <- buf
			return err
		}
		if n == 0 {
			pool <- buf
			return nil
		}
		buf = buf[:n]
		whole.Write(buf)
		h := sha256.Sum256(buf)
		sum := hex.EncodeToString(h[:])
		f.Chunks = append(f.Chunks, Chunk{SHA256: sum, Size: int64(n)})
		f.Size += int64(n)
		if seen[sum] {
			pool <- buf[:cap(buf)]
		} else {
			seen[sum] = true
			select {
			case jobs <- chunkJob{sum: sum, buf: buf}:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// putChunk uploads a chunk unless the bucket already has it; it reports
// whether it sent the bytes. Keys are content hashes, so an existing object
// of the right size is taken as the right content (Restore verifies).
func (s *Store) putChunk(ctx context.Context, sum string, b []byte) (bool, error) {
	key := s.ChunkKey(sum)
	info, err := s.s3.Client.StatObject(ctx, s.s3.Bucket, key, minio.StatObjectOptions{})
	if err == nil && info.Size == int64(len(b)) {
		return false, nil
	}
	if err != nil && !isNoSuchKey(err) {
		return false, fmt.Errorf("stat: %w", err)
	}
	_, err = s.s3.Client.PutObject(ctx, s.s3.Bucket, key, bytes.NewReader(b), int64(len(b)),
		minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return false, fmt.Errorf("put: %w", err)
	}
	return true, nil
}

func checkPath(p string) error {
	if p == "" || !filepath.IsLocal(filepath.FromSlash(p)) || filepath.ToSlash(filepath.Clean(filepath.FromSlash(p))) != p {
		return fmt.Errorf("file path %q: want a clean relative slash-separated path", p)
	}
	return nil
}
