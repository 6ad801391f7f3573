package learner

import (
	"context"
	"fmt"
	"math"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Act writes a deterministic policy's actions for the n observations in
// obs (n × obs_dim) into actions (n × act_dim).
type Act func(obs, actions []float32, n int)

// Evaluate runs act on env, reset with seed, until each of its instances
// has finished ceil(episodes/NumEnvs) episodes, and summarises exactly
// those (counting per instance avoids favouring short episodes): the one
// evaluation loop every learner's Evaluate uses.
func Evaluate(ctx context.Context, env envs.VecEnv, seed uint64, episodes int, act Act) (EvalResult, error) {
	spec := env.Spec()
	n, od, ad := env.NumEnvs(), spec.Observation.Dim(), spec.Action.Dim()
	per := (max(episodes, 1) + n - 1) / n
	obs, fin := make([]float32, n*od), make([]float32, n*od)
	acts, rew := make([]float32, n*ad), make([]float32, n)
	term, trunc := make([]bool, n), make([]bool, n)
	if err := env.Reset(seed, obs); err != nil {
		return EvalResult{}, fmt.Errorf("evaluate: reset %s: %w", spec.Name, err)
	}
	ret := make([]float64, n)
	done := make([]int, n)
	res := EvalResult{ReturnMin: math.Inf(1), ReturnMax: math.Inf(-1)}
	var sum float64
	for remaining := n; remaining > 0; {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("evaluate: %w", err)
		}
		act(obs, acts, n)
		if err := env.Step(acts, obs, rew, term, trunc, fin); err != nil {
			return res, fmt.Errorf("evaluate: step %s: %w", spec.Name, err)
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
