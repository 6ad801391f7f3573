package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Restore writes checkpoint seq of run into dstDir, verifying every chunk's
// and every file's sha256. Each file is written beside its destination and
// renamed into place only once it verified, so a failed Restore never leaves
// a corrupt file under its real name.
func (s *Store) Restore(ctx context.Context, run string, seq int64, dstDir string) error {
	m, err := s.Get(ctx, run, seq)
	if err != nil {
		return err
	}
	return s.RestoreManifest(ctx, m, dstDir)
}

type restoreJob struct {
	f     *os.File
	file  *File
	index int
	off   int64
}

// RestoreManifest restores an already-read manifest (see Restore).
func (s *Store) RestoreManifest(ctx context.Context, m Manifest, dstDir string) error {
	return s.tracedRestore(ctx, m, dstDir)
}

func (s *Store) restoreManifest(ctx context.Context, m Manifest, dstDir string) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	name := fmt.Sprintf("%s/%d", m.Run, m.Seq)

	// Open every temp file first so the chunk downloads of all files share
	// one worker pool.
	temps := make([]*os.File, len(m.Files))
	defer func() {
		for _, t := range temps {
			if t != nil {
				t.Close()
				os.Remove(t.Name())
			}
		}
	}()
	for i := range m.Files {
		f := &m.Files[i]
		if err := checkPath(f.Path); err != nil {
			return fmt.Errorf("restore checkpoint %s: %w", name, err)
		}
		dst := filepath.Join(dstDir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("restore checkpoint %s: %w", name, err)
		}
		t, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".restore-*")
		if err != nil {
			return fmt.Errorf("restore checkpoint %s: %w", name, err)
		}
		temps[i] = t
	}

	jobs := make(chan restoreJob)
	var wg sync.WaitGroup
	for range s.opts.Parallel {
		wg.Go(func() {
			for j := range jobs {
				if err := s.fetchChunk(ctx, j); err != nil {
					cancel(fmt.Errorf("restore checkpoint %s file %s chunk %d (%s): %w", name, j.file.Path, j.index, j.file.Chunks[j.index].SHA256, err))
				}
			}
		})
	}
feed:
	for i := range m.Files {
		var off int64
		for c := range m.Files[i].Chunks {
			select {
			case jobs <- restoreJob{f: temps[i], file: &m.Files[i], index: c, off: off}:
			case <-ctx.Done():
				break feed
			}
			off += m.Files[i].Chunks[c].Size
		}
	}
	close(jobs)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}

	for i := range m.Files {
		f := &m.Files[i]
		if err := verifyFile(temps[i], f); err != nil {
			return fmt.Errorf("restore checkpoint %s file %s: %w", name, f.Path, err)
		}
		mode := fs.FileMode(f.Mode).Perm()
		if mode == 0 {
			mode = 0o644
		}
		if err := temps[i].Chmod(mode); err != nil {
			return fmt.Errorf("restore checkpoint %s file %s: %w", name, f.Path, err)
		}
		if err := temps[i].Close(); err != nil {
			return fmt.Errorf("restore checkpoint %s file %s: %w", name, f.Path, err)
		}
		if err := os.Rename(temps[i].Name(), filepath.Join(dstDir, filepath.FromSlash(f.Path))); err != nil {
			return fmt.Errorf("restore checkpoint %s file %s: %w", name, f.Path, err)
		}
		temps[i] = nil
	}
	return nil
}

func (s *Store) fetchChunk(ctx context.Context, j restoreJob) error {
	c := j.file.Chunks[j.index]
	b, err := s.b.get(ctx, s.ChunkKey(c.SHA256))
	if errors.Is(err, errNoSuchKey) {
		return ErrMissingChunk
	}
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); int64(len(b)) != c.Size || got != c.SHA256 {
		return fmt.Errorf("%w: got %d bytes with sha256 %s, want %d bytes", ErrChecksum, len(b), got, c.Size)
	}
	if _, err := j.f.WriteAt(b, j.off); err != nil {
		return err
	}
	return nil
}

// verifyFile re-reads a restored file: the chunks each verified, but the
// manifest's chunk list must also add up to the file it claims.
func verifyFile(f *os.File, want *File) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != want.Size || got != want.SHA256 {
		return fmt.Errorf("%w: file has %d bytes with sha256 %s, manifest says %d bytes with %s", ErrChecksum, n, got, want.Size, want.SHA256)
	}
	return nil
}
