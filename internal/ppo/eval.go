package ppo

import (
	"context"
	"fmt"

	"github.com/trainyard/trainyard/internal/learner"

	"github.com/trainyard/trainyard/internal/nn"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Act writes actions for n = len(obs)/obs_dim observations: the mode of
// the policy (argmax logit, Gaussian mean clipped to the box). Observation
// statistics are used but not updated. It allocates its buffers per call.
func (l *Learner) Act(obs, actions []float32) error {
	n := len(obs) / l.od
	if n*l.od != len(obs) || len(actions) != n*l.ad {
		return fmt.Errorf("ppo: act: %d observations and %d actions for obs_dim %d, act_dim %d", len(obs), len(actions), l.od, l.ad)
	}
	l.act(obs, actions, n, make([]float64, n*l.od), l.pi.NewWorkspace(n))
	return nil
}

// act is Act with caller-provided scratch: x holds n·obs_dim values, ws
// at least n samples.
func (l *Learner) act(obs, actions []float32, n int, x []float64, ws *nn.Workspace) {
	l.normalizeObs(x, obs, n)
	out := l.pi.Forward(l.params[l.piOff:l.vfOff], ws, x, n)
	for i := 0; i < n; i++ {
		o := out[i*l.nAct : (i+1)*l.nAct]
		if l.discrete {
			if l.masked {
				maskLogits(o, l.rowMask(obs, i), nil)
			}
			best := 0
			for j, z := range o {
				if z > o[best] {
					best = j
				}
			}
			actions[i] = float32(best)
			continue
		}
		for d, mu := range o {
			actions[i*l.ad+d] = min(max(float32(mu), l.actLow[d]), l.actHigh[d])
		}
	}
}

// EvalResult summarises deterministic evaluation episodes.
type EvalResult = learner.EvalResult

// Evaluate runs the deterministic policy (Act) on env, reset with seed,
// for about episodes episodes (learner.Evaluate). env must match the
// learner's spec; the learner's own env and state are untouched.
func (l *Learner) Evaluate(ctx context.Context, env envs.VecEnv, seed uint64, episodes int) (EvalResult, error) {
	spec := env.Spec()
	if spec.Observation.Dim() != l.od || spec.Action.Dim() != l.ad || spec.Action.Kind != l.spec.Action.Kind {
		return EvalResult{}, fmt.Errorf("ppo: evaluate: env %s does not match the learner's %s", spec.Name, l.spec.Name)
	}
	n := env.NumEnvs()
	x, ws := make([]float64, n*l.od), l.pi.NewWorkspace(n)
	res, err := learner.Evaluate(ctx, env, seed, episodes, func(obs, acts []float32, n int) { l.act(obs, acts, n, x, ws) })
	if err != nil {
		return res, fmt.Errorf("ppo: %w", err)
	}
	return res, nil
}
