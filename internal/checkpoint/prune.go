package checkpoint

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Retention says which checkpoints of a run Prune keeps.
type Retention struct {
	KeepLast       int    // the newest KeepLast checkpoints (at least 1)
	KeepBestBy     string // plus the best by this Meta.Metrics key ("" = none)
	HigherIsBetter bool   // direction of KeepBestBy
}

// Prune deletes the manifests of the run's checkpoints that r does not keep
// and returns the deleted sequence numbers. Chunks stay (see CollectGarbage).
// The newest checkpoint is always kept: it is what a crashed run resumes
// from, and it keeps sequence numbers increasing (the next Save numbers
// itself after the newest manifest). Keeping nothing is refused.
func (s *Store) Prune(ctx context.Context, run string, r Retention) ([]int64, error) {
	if r.KeepLast <= 0 && r.KeepBestBy == "" {
		return nil, fmt.Errorf("prune run %s: retention keeps nothing", run)
	}
	ms, err := s.List(ctx, run)
	if err != nil {
		return nil, err
	}
	keep := map[int64]bool{}
	for i := max(0, len(ms)-max(1, r.KeepLast)); i < len(ms); i++ {
		keep[ms[i].Seq] = true
	}
	if r.KeepBestBy != "" {
		best, found := int64(0), false
		var bestV float64
		for _, m := range ms {
			v, ok := m.Meta.Metrics[r.KeepBestBy]
			if !ok || v != v { // missing or NaN never wins
				continue
			}
			// Ties go to the newer checkpoint.
			if !found || (r.HigherIsBetter && v >= bestV) || (!r.HigherIsBetter && v <= bestV) {
				best, bestV, found = m.Seq, v, true
			}
		}
		if found {
			keep[best] = true
		}
	}
	var deleted []int64
	for _, m := range ms {
		if keep[m.Seq] {
			continue
		}
		if err := s.b.remove(ctx, s.ManifestKey(run, m.Seq)); err != nil {
			return deleted, fmt.Errorf("prune checkpoint %s/%d: %w", run, m.Seq, err)
		}
		deleted = append(deleted, m.Seq)
	}
	return deleted, nil
}

// GCStats counts what CollectGarbage did.
type GCStats struct {
	ChunksKept, ChunksDeleted int
	BytesDeleted              int64
}

// CollectGarbage deletes chunks that no manifest of any run references and
// that were last written more than grace ago. Grace protects the chunks a
// Save in flight has uploaded but not yet named in a manifest; it does not
// protect an old, unreferenced chunk that such a Save found present and
// skipped, so run CollectGarbage while no Save is running (e.g. from the
// same process that saves, between checkpoints).
func (s *Store) CollectGarbage(ctx context.Context, grace time.Duration) (GCStats, error) {
	var st GCStats
	refs := map[string]bool{}
	runsPrefix := s.opts.Prefix + "/runs/"
	for o, err := range s.b.list(ctx, runsPrefix) {
		if err != nil {
			return st, fmt.Errorf("checkpoint gc: list manifests: %w", err)
		}
		parts := strings.Split(strings.TrimPrefix(o.Key, runsPrefix), "/")
		if len(parts) != 3 || parts[2] != "manifest.json" {
			continue
		}
		var seq int64
		if _, err := fmt.Sscan(parts[1], &seq); err != nil {
			continue
		}
		m, err := s.Get(ctx, parts[0], seq)
		if err != nil {
			return st, fmt.Errorf("checkpoint gc: %w", err) // unreadable manifest: delete nothing
		}
		for _, f := range m.Files {
			for _, c := range f.Chunks {
				refs[c.SHA256] = true
			}
		}
	}
	cutoff := time.Now().Add(-grace)
	chunksPrefix := s.opts.Prefix + "/chunks/"
	for o, err := range s.b.list(ctx, chunksPrefix) {
		if err != nil {
			return st, fmt.Errorf("checkpoint gc: list chunks: %w", err)
		}
		if refs[strings.TrimPrefix(o.Key, chunksPrefix)] || o.LastModified.After(cutoff) {
			st.ChunksKept++
			continue
		}
		if err := s.b.remove(ctx, o.Key); err != nil {
			return st, fmt.Errorf("checkpoint gc: delete %s: %w", o.Key, err)
		}
		st.ChunksDeleted++
		st.BytesDeleted += o.Size
	}
	return st, nil
}
