package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
	return s.tracedSave(ctx, run, srcs, meta)
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
	return s.tracedSave(ctx, run, srcs, meta)
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
	// Refused before any upload; commit checks again at the end.
	if err := s.checkHolder(ctx, run, meta.Epoch); err != nil {
		return Manifest{}, st, err
	}
	seqs, err := s.seqs(ctx, run)
	if err != nil {
		return Manifest{}, st, err
	}
	// The number the chunks are logged under; commit takes the next free
	// one when the manifest is written.
	seq := int64(1)
	if len(seqs) > 0 {
		seq = seqs[len(seqs)-1] + 1
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	// Parallel+1 chunk buffers (the workers each hold one while the reader
	// fills the next) and one read buffer, so memory stays bounded whatever
	// the checkpoint's size.
	pool := make(chan []byte, s.opts.Parallel+1)
	for range cap(pool) {
		pool <- make([]byte, 0, s.chunker.max)
	}
	stage := make([]byte, stageChunks*s.chunker.max)
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
				pool <- j.buf[:0]
			}
		})
	}

	m := Manifest{Version: ManifestVersion, Run: run, Seq: seq, Created: time.Now().UTC(), ChunkSize: int64(s.chunker.avg), Meta: meta}
	seen := map[string]bool{} // chunks already queued by this save
	readErr := func() error {
		for _, src := range srcs {
			f := File{Path: src.path, Mode: src.mode, Chunks: []Chunk{}}
			whole := sha256.New()
			rc, err := src.open()
			if err != nil {
				return fmt.Errorf("checkpoint %s/%d: open %s: %w", run, seq, src.path, err)
			}
			err = s.chunkFile(ctx, rc, &f, whole, stage, pool, jobs, seen)
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
	if err := s.commit(ctx, &m); err != nil {
		return Manifest{}, st, err
	}
	return m, st, nil
}

// stageChunks is the read buffer's size in maximum chunks: the leftover
// carried to the front on each refill is under one maximum chunk, so a
// bigger buffer moves fewer bytes twice.
const stageChunks = 4

// chunkFile cuts one file into content-defined chunks, hashing as it goes,
// and queues the chunks this save has not queued yet. It reads into stage
// and copies each chunk into a pool buffer, so the reader never waits for an
// upload to hand a buffer back before it can look ahead.
func (s *Store) chunkFile(ctx context.Context, r io.Reader, f *File, whole hash.Hash, stage []byte, pool chan []byte, jobs chan<- chunkJob, seen map[string]bool) error {
	var start, end int // stage[start:end] is read but not yet chunked
	var eof bool
	var readErr error
	for {
		// A boundary is only known once a maximum chunk is in view (or
		// the file has ended), so refill before cutting.
		if !eof && readErr == nil && end-start < s.chunker.max {
			end = copy(stage, stage[start:end])
			start = 0
			n, err := io.ReadFull(r, stage[end:])
			end += n
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				eof = true
			} else if err != nil {
				// Still queue the chunks whose boundaries are certain, as
				// a retry will find them stored.
				readErr = err
			}
		}
		if readErr != nil && end-start < s.chunker.max {
			return readErr
		}
		if start == end {
			return nil
		}
		n := s.chunker.cut(stage[start:end])
		chunk := stage[start : start+n]
		start += n
		whole.Write(chunk)
		h := sha256.Sum256(chunk)
		sum := hex.EncodeToString(h[:])
		f.Chunks = append(f.Chunks, Chunk{SHA256: sum, Size: int64(n)})
		f.Size += int64(n)
		if seen[sum] {
			continue
		}
		seen[sum] = true
		var buf []byte
		select {
		case buf = <-pool:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		select {
		case jobs <- chunkJob{sum: sum, buf: append(buf[:0], chunk...)}:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// putChunk uploads a chunk unless the bucket already has it; it reports
// whether it sent the bytes. Keys are content hashes, so an existing object
// of the right size is taken as the right content (Restore verifies).
func (s *Store) putChunk(ctx context.Context, sum string, b []byte) (bool, error) {
	key := s.ChunkKey(sum)
	size, err := s.b.size(ctx, key)
	if err == nil && size == int64(len(b)) {
		return false, nil
	}
	if err != nil && !errors.Is(err, errNoSuchKey) {
		return false, fmt.Errorf("stat: %w", err)
	}
	if err := s.b.put(ctx, key, b, "application/octet-stream"); err != nil {
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
