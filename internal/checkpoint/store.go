package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/internal/objstore"
)

// Options tune a Store; zero values pick the defaults.
type Options struct {
	Prefix string // key prefix, default "checkpoints"
	// ChunkSize is the average chunk size in bytes, rounded down to a power
	// of two; chunks are content-defined and between 1/4 and 4 times it
	// (a file's last chunk may be smaller). Default 64 KiB. Only affects
	// new saves: restores read the sizes from the manifest.
	ChunkSize int64
	Parallel  int // concurrent chunk transfers, default 4
}

// Store saves and restores checkpoints in one bucket.
type Store struct {
	b       blobs
	opts    Options
	chunker chunker
}

// New wraps an opened bucket.
func New(s3 *objstore.Store, opts Options) *Store { return over(s3Bucket{s3}, opts) }

func over(b blobs, opts Options) *Store {
	if opts.Prefix == "" {
		opts.Prefix = "checkpoints"
	}
	opts.Prefix = strings.Trim(opts.Prefix, "/")
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = 64 << 10
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	return &Store{b: b, opts: opts, chunker: newChunker(opts.ChunkSize)}
}

// ChunkKey is the object key of a chunk.
func (s *Store) ChunkKey(sum string) string { return s.opts.Prefix + "/chunks/" + sum }

// ManifestKey is the object key of a checkpoint's manifest.
func (s *Store) ManifestKey(run string, seq int64) string {
	return s.runPrefix(run) + fmt.Sprintf("%010d", seq) + "/manifest.json"
}

func (s *Store) runPrefix(run string) string { return s.opts.Prefix + "/runs/" + run + "/" }

// List returns a run's complete checkpoints, oldest first. Only manifests
// are listed, so a checkpoint still being written does not show, and only
// visible ones (fence.go): a superseded placement's late write does not.
func (s *Store) List(ctx context.Context, run string) ([]Manifest, error) {
	f, _, err := s.readFence(ctx, run)
	if err != nil {
		return nil, err
	}
	all, err := s.manifests(ctx, run)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, m := range all {
		if f.visible(m) {
			out = append(out, m)
		}
	}
	return out, nil
}

// Latest returns the newest visible checkpoint of a run, or ErrNotFound.
func (s *Store) Latest(ctx context.Context, run string) (Manifest, error) {
	f, _, err := s.readFence(ctx, run)
	if err != nil {
		return Manifest{}, err
	}
	seqs, err := s.seqs(ctx, run)
	if err != nil {
		return Manifest{}, err
	}
	for i := len(seqs) - 1; i >= 0; i-- {
		m, err := s.Get(ctx, run, seqs[i])
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return m, err
		}
		if f.visible(m) {
			return m, nil
		}
	}
	return Manifest{}, fmt.Errorf("latest checkpoint of run %s: %w", run, ErrNotFound)
}

// Get reads one checkpoint's manifest.
func (s *Store) Get(ctx context.Context, run string, seq int64) (Manifest, error) {
	var m Manifest
	if err := checkRun(run); err != nil {
		return m, err
	}
	key := s.ManifestKey(run, seq)
	b, err := s.b.get(ctx, key)
	if errors.Is(err, errNoSuchKey) {
		return m, fmt.Errorf("checkpoint %s/%d: %w", run, seq, ErrNotFound)
	}
	if err != nil {
		return m, fmt.Errorf("read checkpoint %s/%d manifest: %w", run, seq, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("checkpoint %s/%d manifest %s: %w", run, seq, key, err)
	}
	if m.Version != ManifestVersion {
		return m, fmt.Errorf("checkpoint %s/%d manifest: unsupported version %d", run, seq, m.Version)
	}
	if m.Run != run || m.Seq != seq {
		return m, fmt.Errorf("checkpoint %s/%d manifest names %s/%d", run, seq, m.Run, m.Seq)
	}
	return m, nil
}

// seqs lists the sequence numbers that have a manifest, ascending.
func (s *Store) seqs(ctx context.Context, run string) ([]int64, error) {
	if err := checkRun(run); err != nil {
		return nil, err
	}
	var seqs []int64
	prefix := s.runPrefix(run)
	for o, err := range s.b.list(ctx, prefix) {
		if err != nil {
			return nil, fmt.Errorf("list checkpoints of run %s: %w", run, err)
		}
		rest := strings.TrimPrefix(o.Key, prefix)
		dir, file := path.Split(rest)
		if file != "manifest.json" {
			continue
		}
		seq, err := strconv.ParseInt(strings.TrimSuffix(dir, "/"), 10, 64)
		if err != nil {
			continue // not ours
		}
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs, nil
}

// commit writes m's manifest, the step that makes a checkpoint visible,
// under the next free sequence number: If-None-Match means a number taken
// meanwhile (by a late writer of an older placement) is never overwritten.
// A fenced writer (Meta.Epoch > 0) must hold the run before and after.
func (s *Store) commit(ctx context.Context, m *Manifest) error {
	for range 16 {
		if err := s.checkHolder(ctx, m.Run, m.Meta.Epoch); err != nil {
			return err
		}
		seqs, err := s.seqs(ctx, m.Run)
		if err != nil {
			return err
		}
		m.Seq = 1
		if len(seqs) > 0 {
			m.Seq = seqs[len(seqs)-1] + 1
		}
		b, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return err
		}
		err = s.b.putIf(ctx, s.ManifestKey(m.Run, m.Seq), b, "application/json", "")
		if errors.Is(err, errPrecondition) {
			continue
		}
		if err != nil {
			return fmt.Errorf("write checkpoint %s/%d manifest: %w", m.Run, m.Seq, err)
		}
		// A claim between the check and the write: the fence already hides
		// this manifest; remove it so no later base can show it.
		if err := s.checkHolder(ctx, m.Run, m.Meta.Epoch); err != nil {
			if rerr := s.b.remove(ctx, s.ManifestKey(m.Run, m.Seq)); rerr != nil {
				err = errors.Join(err, rerr)
			}
			return err
		}
		return nil
	}
	return fmt.Errorf("write checkpoint of run %s: its sequence numbers kept being taken", m.Run)
}

func isNoSuchKey(err error) bool {
	if err == nil {
		return false
	}
	code := minio.ToErrorResponse(err).Code
	return code == minio.NoSuchKey || code == "NotFound"
}
