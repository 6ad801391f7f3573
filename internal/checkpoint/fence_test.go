package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

// stores runs a fencing test on the S3 gateway and on a directory store.
func stores(t *testing.T, f func(t *testing.T, s *Store)) {
	t.Run("s3", func(t *testing.T) { f(t, newStore(t)) })
	t.Run("dir", func(t *testing.T) {
		s, err := NewDir(t.TempDir(), Options{ChunkSize: testChunk})
		if err != nil {
			t.Fatal(err)
		}
		f(t, s)
	})
}

func saveAt(ctx context.Context, s *Store, epoch int64, it int64) (Manifest, error) {
	m, _, err := s.Save(ctx, "r", map[string]io.Reader{"w": strings.NewReader(fmt.Sprint("weights at ", it))}, Meta{Iteration: it, Epoch: epoch})
	return m, err
}

func latestSeq(t *testing.T, s *Store) int64 {
	t.Helper()
	m, err := s.Latest(t.Context(), "r")
	if err != nil {
		t.Fatalf("Latest: %v", err)
	}
	return m.Seq
}

// TestLateWriterNeverBecomesLatest plays a partition: placement 1 keeps
// training after the run moved to placement 2, and writes late.
func TestLateWriterNeverBecomesLatest(t *testing.T) {
	stores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		if _, err := s.Claim(ctx, "r", 1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("first claim: %v, want ErrNotFound (nothing to resume)", err)
		}
		for it := int64(10); it <= 20; it += 10 {
			if _, err := saveAt(ctx, s, 1, it); err != nil {
				t.Fatal(err)
			}
		}
		m, err := s.Claim(ctx, "r", 2)
		if err != nil || m.Seq != 2 || m.Meta.Iteration != 20 {
			t.Fatalf("claim 2 resumes from %d (iteration %d), %v; want 2 (20)", m.Seq, m.Meta.Iteration, err)
		}
		// The old placement's next checkpoint is refused, before and after
		// the new one writes.
		if _, err := saveAt(ctx, s, 1, 30); !errors.Is(err, ErrStale) {
			t.Fatalf("late save of placement 1: %v, want ErrStale", err)
		}
		if m, err := saveAt(ctx, s, 2, 30); err != nil || m.Seq != 3 {
			t.Fatalf("placement 2 saves %d, %v; want 3", m.Seq, err)
		}
		if _, err := saveAt(ctx, s, 1, 40); !errors.Is(err, ErrStale) {
			t.Fatalf("late save of placement 1: %v, want ErrStale", err)
		}
		if got := latestSeq(t, s); got != 3 {
			t.Fatalf("latest %d, want 3", got)
		}
		// An older claim cannot take the run back.
		if _, err := s.Claim(ctx, "r", 1); !errors.Is(err, ErrStale) {
			t.Fatalf("claim 1 again: %v, want ErrStale", err)
		}
		// Claiming again the epoch one holds is harmless.
		if m, err := s.Claim(ctx, "r", 2); err != nil || m.Seq != 3 {
			t.Fatalf("claim 2 again: %d, %v; want 3", m.Seq, err)
		}

		// A write that raced the claim and whose writer died before taking
		// it back: written as placement 1 right after placement 2's last
		// check, bypassing the checks.
		late := Manifest{Version: ManifestVersion, Run: "r", Seq: 4, Meta: Meta{Iteration: 99, Epoch: 1}, Files: []File{}}
		b, _ := json.Marshal(late)
		if err := s.b.putIf(ctx, s.ManifestKey("r", 4), b, "application/json", ""); err != nil {
			t.Fatal(err)
		}
		if got := latestSeq(t, s); got != 3 {
			t.Fatalf("latest %d after a late manifest, want 3", got)
		}
		ms, err := s.List(ctx, "r")
		if err != nil || len(ms) != 3 {
			t.Fatalf("List %d checkpoints, %v; want the 3 visible", len(ms), err)
		}
		// The next placement's claim sweeps it: it never shows, even once
		// the base passes its number.
		if m, err := s.Claim(ctx, "r", 3); err != nil || m.Seq != 3 {
			t.Fatalf("claim 3 resumes from %d, %v; want 3", m.Seq, err)
		}
		if _, err := s.Get(ctx, "r", 4); !errors.Is(err, ErrNotFound) {
			t.Fatalf("late manifest after claim 3: %v, want swept", err)
		}
		for range 2 {
			if _, err := saveAt(ctx, s, 3, 50); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range mustList(t, s) {
			if m.Meta.Iteration == 99 {
				t.Fatalf("the late checkpoint became visible: %+v", m.Meta)
			}
		}
		if _, err := saveAt(ctx, s, 2, 60); !errors.Is(err, ErrStale) {
			t.Fatalf("late save of placement 2: %v, want ErrStale", err)
		}
	})
}

func mustList(t *testing.T, s *Store) []Manifest {
	t.Helper()
	ms, err := s.List(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestConcurrentWritersNeverShareANumber: without If-None-Match two saves
// that listed the same newest manifest wrote the same key, and the later
// one replaced the other.
func TestConcurrentWritersNeverShareANumber(t *testing.T) {
	stores(t, func(t *testing.T, s *Store) {
		const n = 8
		var wg sync.WaitGroup
		seqs := make(chan int64, n)
		for i := range n {
			wg.Go(func() {
				m, err := saveAt(t.Context(), s, 0, int64(i))
				if err != nil {
					t.Error(err)
				}
				seqs <- m.Seq
			})
		}
		wg.Wait()
		close(seqs)
		seen := map[int64]bool{}
		for q := range seqs {
			if seen[q] {
				t.Errorf("sequence number %d given twice", q)
			}
			seen[q] = true
		}
		if got := len(mustList(t, s)); got != n {
			t.Fatalf("%d checkpoints listed, want %d", got, n)
		}
	})
}

// TestClaimsNeverGoBackwards: placements claiming at once (a late start
// of an old one among them) leave the newest holding the run.
func TestClaimsNeverGoBackwards(t *testing.T) {
	stores(t, func(t *testing.T, s *Store) {
		const n = 8
		var wg sync.WaitGroup
		for e := range int64(n) {
			wg.Go(func() {
				if _, err := s.Claim(t.Context(), "r", e+1); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrStale) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		f, _, err := s.readFence(t.Context(), "r")
		if err != nil || f.Epoch != n {
			t.Fatalf("fence %+v, %v; want epoch %d", f, err, n)
		}
		if _, err := saveAt(t.Context(), s, n-1, 1); !errors.Is(err, ErrStale) {
			t.Fatalf("save of placement %d: %v, want ErrStale", n-1, err)
		}
	})
}
