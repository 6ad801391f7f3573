package ppo

import (
	"context"
	"fmt"
	"math"

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
// until each of its instances has finished ceil(episodes/NumEnvs) episodes,
// and summarises exactly those (counting per instance avoids favouring
// short episodes). env must match the learner's spec; the learner's own
// env and state are untouched.
func (l *Learner) Evaluate(ctx context.Context, env envs.VecEnv, seed uint64, episodes int) (EvalResult, error) {
	spec := env.Spec()
	if spec.Observation.Dim() != l.od || spec.Action.Dim() != l.ad || spec.Action.Kind != l.spec.Action.Kind {
		return EvalResult{}, fmt.Errorf("ppo: evaluate: env %s does not match the learner's %s", spec.Name, l.spec.Name)
	}
	n := env.NumEnvs()
	per := (episodes + n - 1) / n
	obs, fin := make([]float32, n*l.od), make([]float32, n*l.od)
	acts, rew := make([]float32, n*l.ad), make([]float32, n)
	term, trunc := make([]bool, n), make([]bool, n)
	if err := env.Reset(seed, obs); err != nil {
		return EvalResult{}, fmt.Errorf("ppo: evaluate: reset %s: %w", spec.Name, err)
	}
	x, ws := make([]float64, n*l.od), l.pi.NewWorkspace(n)
	ret := make([]float64, n)
	done := make([]int, n)
	res := EvalResult{ReturnMin: math.Inf(1), ReturnMax: math.Inf(-1)}
	var sum float64
	for remaining := n; remaining > 0; {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("ppo: evaluate: %w", err)
		}
		l.act(obs, acts, n, x, ws)
		if err := env.Step(acts, obs, rew, term, trunc, fin); err != nil {
			return res, fmt.Errorf("ppo: evaluate: step %s: %w", spec.Name, err)
		}
		for i := 0; i < n; i++ {
			ret[i] += float64(rew[i])
			if !term[i] && !trunc[i] {
				continue
			}
			if done[i] < per {
				res.Episodes++
				sum += ret[i]
				res.ReturnMin = min(res.ReturnMin, ret[i])
				res.ReturnMax = max(res.ReturnMax, ret[i])
				if done[i]++; done[i] == per {
					remaining--
				}
			}
			ret[i] = 0
		}
	}
	res.ReturnMean = sum / float64(res.Episodes)
	return res, nil
}
