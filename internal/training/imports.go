package training

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// A multi-agent run's policy may be a network frozen from an earlier run's
// checkpoint (learner.Policy.Checkpoint). Submission pins the checkpoint
// (PinImports: RUN becomes RUN@SEQ, so every placement and resume of the
// run plays the same opponent) and checks that it holds such a policy for
// the env; the agent reads it before the learner is made (Runner.imports).
// Once the run has a checkpoint of its own, that holds the policy.

// PinImports pins every imported policy of s to a checkpoint of store and
// checks it against env; errors are field errors naming the policy.
func (s *Spec) PinImports(ctx context.Context, store *checkpoint.Store, env envs.Spec) error {
	names := importedPolicies(*s)
	if len(names) == 0 {
		return nil
	}
	f, err := s.factory()
	if err != nil {
		return err
	}
	imp, ok := f.(learner.Importer)
	if !ok {
		return &FieldError{Field: "policies." + names[0] + ".checkpoint", Reason: fmt.Sprintf("algorithm %s takes no policies from checkpoints", s.Algorithm)}
	}
	pols := maps.Clone(s.Policies)
	for _, n := range names {
		field := "policies." + n + ".checkpoint"
		p := pols[n]
		ref, err := learner.ParseCheckpointRef(p.Checkpoint)
		if err != nil {
			return &FieldError{Field: field, Reason: err.Error()}
		}
		seq, data, err := readImport(ctx, store, ref)
		if errors.Is(err, checkpoint.ErrNotFound) {
			return &FieldError{Field: field, Reason: fmt.Sprintf("run %s has no checkpoint %s", ref.Run, seqName(ref.Seq))}
		} else if err != nil {
			return fmt.Errorf("policy %s: %w", n, err)
		}
		if err := imp.CheckImport(data, env, n, ref.Policy); err != nil {
			return &FieldError{Field: field, Reason: err.Error()}
		}
		ref.Seq = seq
		p.Checkpoint = ref.String()
		pols[n] = p
	}
	s.Policies = pols
	return nil
}

// readImport reads the learner checkpoint ref names (its run's latest when
// ref.Seq is 0) and returns its seq.
func readImport(ctx context.Context, store *checkpoint.Store, ref learner.CheckpointRef) (int64, []byte, error) {
	var m checkpoint.Manifest
	var err error
	if ref.Seq == 0 {
		m, err = store.Latest(ctx, ref.Run)
	} else {
		m, err = store.Get(ctx, ref.Run, ref.Seq)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("checkpoint %s: %w", ref, err)
	}
	files, err := readFiles(ctx, store, m, FileLearner)
	if err != nil {
		return 0, nil, fmt.Errorf("checkpoint %s: %w", ref, err)
	}
	return m.Seq, files[FileLearner], nil
}

func seqName(seq int64) string {
	if seq == 0 {
		return "yet"
	}
	return fmt.Sprint(seq)
}

// importedPolicies names the spec's policies frozen from checkpoints.
func importedPolicies(s Spec) []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(s.Policies)) {
		if s.Policies[n].Imported() {
			out = append(out, n)
		}
	}
	return out
}

// imports reads the learner checkpoints of spec's imported policies (pinned
// at submission) for a fresh learner.
func (r *Runner) imports(ctx context.Context, spec Spec) (map[string][]byte, error) {
	names := importedPolicies(spec)
	if len(names) == 0 {
		return nil, nil
	}
	if r.Checkpoints == nil {
		return nil, fmt.Errorf("policy %s: %w: no checkpoint store to read %s from", names[0], ErrFatal, spec.Policies[names[0]].Checkpoint)
	}
	out := map[string][]byte{}
	for _, n := range names {
		ref, err := learner.ParseCheckpointRef(spec.Policies[n].Checkpoint)
		if err != nil || ref.Seq == 0 {
			return nil, fmt.Errorf("policy %s: %w: checkpoint %q is not pinned", n, ErrFatal, spec.Policies[n].Checkpoint)
		}
		_, data, err := readImport(ctx, r.Checkpoints, ref)
		if errors.Is(err, checkpoint.ErrNotFound) {
			return nil, fmt.Errorf("policy %s: %w: %w", n, ErrFatal, err)
		} else if err != nil {
			return nil, fmt.Errorf("policy %s: %w", n, err)
		}
		out[n] = data
	}
	return out, nil
}
