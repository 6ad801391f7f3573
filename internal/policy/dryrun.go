package policy

import (
	"context"
	"fmt"
	"slices"
)

// Change is an item whose decision differs between two bundles.
type Change struct {
	Index  int      `json:"index"`
	WorkID string   `json:"work_id"`
	Before Decision `json:"before"`
	After  Decision `json:"after"`
	// Added are violations only the proposed bundle reports; Removed only
	// the current one.
	Added   []Violation `json:"added,omitempty"`
	Removed []Violation `json:"removed,omitempty"`
}

// DryRun evaluates items (the queue and running work) under the current
// and the proposed bundle and returns exactly the items whose decision
// changes: allow flips or the set of violations differs.
func DryRun(ctx context.Context, current, proposed Bundle, items []Input) ([]Change, error) {
	cur, err := New(ctx, current)
	if err != nil {
		return nil, fmt.Errorf("dry-run: current bundle: %w", err)
	}
	next, err := New(ctx, proposed)
	if err != nil {
		return nil, fmt.Errorf("dry-run: proposed bundle: %w", err)
	}
	var out []Change
	for i, in := range items {
		before, err := cur.Decide(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("dry-run item %d (%s): %w", i, in.Work.ID, err)
		}
		after, err := next.Decide(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("dry-run item %d (%s): %w", i, in.Work.ID, err)
		}
		added := minus(after.Violations, before.Violations)
		removed := minus(before.Violations, after.Violations)
		if before.Allow == after.Allow && len(added) == 0 && len(removed) == 0 {
			continue
		}
		out = append(out, Change{Index: i, WorkID: in.Work.ID, Before: before, After: after, Added: added, Removed: removed})
	}
	return out, nil
}

func minus(a, b []Violation) []Violation {
	var out []Violation
	for _, v := range a {
		if !slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	return out
}
