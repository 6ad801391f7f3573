package train

import (
	"context"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/training"
)

// finish ends a run whose last segment is done: its evaluation, and
// completed (with the reason) when the budget ran out short of the target,
// succeeded otherwise. It returns that state.
func (p *RunProgress) finish(spec training.Spec, seg training.SegmentResult) string {
	p.Eval = seg.Eval
	// A budget spent short of the target is not a success.
	if p.Reason = spec.Missed(p.Metrics, p.BestReturn); p.Reason != "" {
		return "completed"
	}
	return "succeeded"
}

// RunLocal trains a run in this process with r, segment after segment as
// the workflow does on a node's agent (the same Runner, the same
// checkpoints when r keeps them), and returns the progress the workflow
// would: `trainyard run train --local`. iteration is called after every
// iteration with the progress so far and the iteration's metrics.
func RunLocal(ctx context.Context, r *training.Runner, in Input, iteration func(RunProgress, learner.Metrics)) (RunProgress, error) {
	spec := in.Spec // defaulted by the caller, as at submission
	p := &RunProgress{State: "running", Metrics: []learner.Metrics{}}
	defer r.Forget(in.RunID)
	for {
		seg, err := r.RunSegment(ctx, training.SegmentInput{
			RunID: in.RunID, Spec: spec, EnvPlugin: in.EnvPlugin, RewardPlugin: in.RewardPlugin,
			FromCheckpoint: p.Checkpoint, Iterations: spec.CheckpointEvery, Endpoints: in.Endpoints,
		}, func(m learner.Metrics) {
			if iteration != nil {
				iteration(*p, m)
			}
		})
		if err != nil {
			p.State, p.Reason = "failed", err.Error()
			return *p, err
		}
		p.apply(seg)
		if seg.Done {
			p.State = p.finish(spec, seg)
			return *p, nil
		}
	}
}
