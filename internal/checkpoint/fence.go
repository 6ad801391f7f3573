package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Fencing. A run is written by one placement at a time, but a placement
// that lost its node (a partition, a node declared dead) may still be
// running there and write late, after the run moved on. Each placement has
// an epoch, strictly increasing over the run's life (the run workflow
// counts them). Claim makes an epoch the run's writer in
// runs/<run>/fence.json; from then on:
//
//   - a Save of an older epoch is refused (ErrStale) before its manifest is
//     written, and one that raced the claim removes its own manifest;
//   - a manifest an older epoch still managed to write after the claim
//     (its writer died between writing and removing it) is never visible:
//     only checkpoints of the fence's epoch or later, and those that were
//     already there when it claimed (seq <= base), are the run's;
//   - manifests are written with If-None-Match, so two writers never share a
//     sequence number and a late write cannot replace the run's checkpoint.
//
// The fence is updated with If-Match, so claims never go backwards. Saves
// with Epoch 0 (local runs, tools) neither claim nor check.

// ErrStale means a newer placement holds the run: this writer's work is
// no longer the run's.
var ErrStale = errors.New("superseded by a newer placement")

// fence is runs/<run>/fence.json.
type fence struct {
	Epoch int64 `json:"epoch"`
	Base  int64 `json:"base"` // the newest visible checkpoint when Epoch claimed the run
}

// visible says whether m is one of the run's checkpoints under f.
func (f fence) visible(m Manifest) bool { return m.Meta.Epoch >= f.Epoch || m.Seq <= f.Base }

func (s *Store) fenceKey(run string) string { return s.runPrefix(run) + "fence.json" }

// readFence returns the run's fence and its entity tag (zero and "" when
// no placement ever claimed the run).
func (s *Store) readFence(ctx context.Context, run string) (fence, string, error) {
	var f fence
	b, tag, err := s.b.getTagged(ctx, s.fenceKey(run))
	switch {
	case errors.Is(err, errNoSuchKey):
		return f, "", nil
	case err != nil:
		return f, "", fmt.Errorf("read fence of run %s: %w", run, err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, "", fmt.Errorf("fence of run %s: %w", run, err)
	}
	return f, tag, nil
}

// Claim makes epoch the run's writer and returns the checkpoint it must
// resume from (ErrNotFound: none yet). Claiming an epoch again returns the
// run's latest; an epoch older than the fence's is ErrStale.
func (s *Store) Claim(ctx context.Context, run string, epoch int64) (Manifest, error) {
	if err := checkRun(run); err != nil {
		return Manifest{}, err
	}
	if epoch <= 0 {
		return Manifest{}, fmt.Errorf("claim run %s: epoch %d: want > 0", run, epoch)
	}
	for range 16 {
		f, tag, err := s.readFence(ctx, run)
		if err != nil {
			return Manifest{}, err
		}
		if f.Epoch > epoch {
			meter().staleRefused.Add(ctx, 1)
			return Manifest{}, fmt.Errorf("claim run %s for placement %d: placement %d holds it: %w", run, epoch, f.Epoch, ErrStale)
		}
		all, err := s.manifests(ctx, run)
		if err != nil {
			return Manifest{}, err
		}
		var latest Manifest
		for _, m := range all {
			if f.visible(m) {
				latest = m
			}
		}
		if f.Epoch == epoch {
			return found(run, latest)
		}
		// What the superseded writers left behind the old fence goes now,
		// so that the new base cannot make it visible.
		for _, m := range all {
			if !f.visible(m) {
				if err := s.b.remove(ctx, s.ManifestKey(run, m.Seq)); err != nil {
					return Manifest{}, fmt.Errorf("claim run %s: remove stale checkpoint %d: %w", run, m.Seq, err)
				}
			}
		}
		b, _ := json.Marshal(fence{Epoch: epoch, Base: latest.Seq})
		err = s.b.putIf(ctx, s.fenceKey(run), b, "application/json", tag)
		if errors.Is(err, errPrecondition) {
			continue // another placement claimed meanwhile: look again
		}
		if err != nil {
			return Manifest{}, fmt.Errorf("claim run %s for placement %d: %w", run, epoch, err)
		}
		return found(run, latest)
	}
	return Manifest{}, fmt.Errorf("claim run %s for placement %d: the fence kept changing", run, epoch)
}

func found(run string, m Manifest) (Manifest, error) {
	if m.Seq == 0 {
		return m, fmt.Errorf("latest checkpoint of run %s: %w", run, ErrNotFound)
	}
	return m, nil
}

// checkHolder refuses a write of a placement the run's fence has passed.
func (s *Store) checkHolder(ctx context.Context, run string, epoch int64) error {
	if epoch == 0 {
		return nil
	}
	f, _, err := s.readFence(ctx, run)
	switch {
	case err != nil:
		return err
	case f.Epoch > epoch:
		meter().staleRefused.Add(ctx, 1)
		return fmt.Errorf("checkpoint of run %s by placement %d refused: placement %d holds the run: %w", run, epoch, f.Epoch, ErrStale)
	case f.Epoch < epoch:
		return fmt.Errorf("checkpoint of run %s by placement %d: the placement never claimed the run", run, epoch)
	}
	return nil
}

// manifests reads every manifest of a run, visible or not, oldest first.
func (s *Store) manifests(ctx context.Context, run string) ([]Manifest, error) {
	seqs, err := s.seqs(ctx, run)
	if err != nil {
		return nil, err
	}
	out := make([]Manifest, 0, len(seqs))
	for _, seq := range seqs {
		m, err := s.Get(ctx, run, seq)
		if errors.Is(err, ErrNotFound) {
			continue // pruned between listing and reading
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
