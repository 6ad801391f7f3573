package pluginhost

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

// RolloutStats summarizes a random-action rollout.
type RolloutStats struct {
	Steps       int           `json:"steps"` // environment steps (batch calls × N)
	Episodes    int           `json:"episodes"`
	MeanReturn  float64       `json:"mean_return"`
	MinReturn   float64       `json:"min_return"`
	MaxReturn   float64       `json:"max_return"`
	MeanLength  float64       `json:"mean_length"`
	Elapsed     time.Duration `json:"elapsed"`
	StepsPerSec float64       `json:"steps_per_sec"`
}

// Rollout drives env with uniformly random actions from its action space for
// at least steps environment steps (rounded up to whole batches), seeded by
// seed, and reports throughput and episode statistics.
func Rollout(ctx context.Context, env envs.VecEnv, steps int, seed uint64) (RolloutStats, error) {
	sp, n := env.Spec(), env.NumEnvs()
	od, ad := sp.Observation.Dim(), sp.Action.Dim()
	obs, finalObs := make([]float32, n*od), make([]float32, n*od)
	actions, rewards := make([]float32, n*ad), make([]float32, n)
	term, trunc := make([]bool, n), make([]bool, n)
	ret, length := make([]float64, n), make([]int, n)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	st := RolloutStats{MinReturn: math.Inf(1), MaxReturn: math.Inf(-1)}
	var sumRet, sumLen float64

	start := time.Now()
	if err := env.Reset(seed, obs); err != nil {
		return st, fmt.Errorf("rollout %s: %w", sp.Name, err)
	}
	for st.Steps < steps {
		if err := ctx.Err(); err != nil {
			return st, fmt.Errorf("rollout %s: %w", sp.Name, err)
		}
		sample(sp.Action, rng, actions)
		if err := env.Step(actions, obs, rewards, term, trunc, finalObs); err != nil {
			return st, fmt.Errorf("rollout %s after %d steps: %w", sp.Name, st.Steps, err)
		}
		st.Steps += n
		for i := 0; i < n; i++ {
			ret[i] += float64(rewards[i])
			length[i]++
			if term[i] || trunc[i] {
				st.Episodes++
				sumRet += ret[i]
				sumLen += float64(length[i])
				st.MinReturn = min(st.MinReturn, ret[i])
				st.MaxReturn = max(st.MaxReturn, ret[i])
				ret[i], length[i] = 0, 0
			}
		}
	}
	st.Elapsed = time.Since(start)
	st.StepsPerSec = float64(st.Steps) / st.Elapsed.Seconds()
	if st.Episodes > 0 {
		st.MeanReturn, st.MeanLength = sumRet/float64(st.Episodes), sumLen/float64(st.Episodes)
	} else {
		st.MinReturn, st.MaxReturn = 0, 0
	}
	return st, nil
}

// sample fills dst with uniform random actions (n values per element).
func sample(s envs.Space, rng *rand.Rand, dst []float32) {
	switch s.Kind {
	case envs.Discrete:
		for i := range dst {
			dst[i] = float32(rng.IntN(s.N))
		}
	case envs.MultiDiscrete:
		d := len(s.Nvec)
		for i := range dst {
			dst[i] = float32(rng.IntN(s.Nvec[i%d]))
		}
	default:
		d := s.Dim()
		for i := range dst {
			lo, hi := float32(-1), float32(1)
			if len(s.Low) == d {
				lo, hi = s.Low[i%d], s.High[i%d]
			}
			if math.IsInf(float64(lo), 0) || math.IsInf(float64(hi), 0) {
				lo, hi = -1, 1
			}
			dst[i] = lo + rng.Float32()*(hi-lo)
		}
	}
}
