package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestDirAndBucketKeepTheSameCheckpoints: a Store over a local directory
// (NewDir) saves, lists, restores, prunes and collects garbage exactly as
// one over S3, with the same keys as files.
func TestDirAndBucketKeepTheSameCheckpoints(t *testing.T) {
	dirRoot := t.TempDir()
	dirStore, err := NewDir(dirRoot, Options{ChunkSize: testChunk, Parallel: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		store *Store
	}{
		{"s3", newStore(t)},
		{"dir", dirStore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := tc.store
			if _, err := s.Latest(ctx, "run-a"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("latest of an empty store: %v, want ErrNotFound", err)
			}
			files := map[string][]byte{"learner.ckpt": randBytes(1, 5*testChunk), "spec.json": []byte(`{"seed":7}`)}
			var seqs []int64
			for i := range 3 {
				files["learner.ckpt"][i] ^= 0xff // a new chunk each time
				m, _, err := s.Save(ctx, "run-a", readers(files), Meta{Iteration: int64(i + 1), Metrics: map[string]float64{"mean_return": float64(10 - i)}})
				if err != nil {
					t.Fatal(err)
				}
				seqs = append(seqs, m.Seq)
			}
			if want := []int64{1, 2, 3}; !slices.Equal(seqs, want) {
				t.Fatalf("seqs %v, want %v", seqs, want)
			}
			latest, err := s.Latest(ctx, "run-a")
			if err != nil || latest.Seq != 3 || latest.Meta.Iteration != 3 {
				t.Fatalf("latest: %+v, %v", latest, err)
			}
			dst := t.TempDir()
			if err := s.Restore(ctx, "run-a", 3, dst); err != nil {
				t.Fatal(err)
			}
			for name, want := range files {
				got, err := os.ReadFile(filepath.Join(dst, name))
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("restored %s: %d bytes, %v; want the %d saved", name, len(got), err, len(want))
				}
			}
			// Keep the newest and the best (seq 1: mean return 10).
			deleted, err := s.Prune(ctx, "run-a", Retention{KeepLast: 1, KeepBestBy: "mean_return", HigherIsBetter: true})
			if err != nil || !slices.Equal(deleted, []int64{2}) {
				t.Fatalf("prune deleted %v (%v), want [2]", deleted, err)
			}
			ms, err := s.List(ctx, "run-a")
			if err != nil || len(ms) != 2 || ms[0].Seq != 1 || ms[1].Seq != 3 {
				t.Fatalf("list after prune: %v, %v", ms, err)
			}
			st, err := s.CollectGarbage(ctx, 0)
			if err != nil || st.ChunksDeleted != 1 {
				t.Fatalf("gc: %+v, %v; want the one chunk only checkpoint 2 named deleted", st, err)
			}
			if err := s.Restore(ctx, "run-a", 1, t.TempDir()); err != nil {
				t.Fatalf("restore of a kept checkpoint after gc: %v", err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dirRoot, "checkpoints", "runs", "run-a", "0000000003", "manifest.json")); err != nil {
		t.Fatalf("the dir store keeps S3's layout: %v", err)
	}
}
