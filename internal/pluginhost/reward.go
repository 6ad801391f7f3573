package pluginhost

import (
	"context"
	"fmt"
	"math"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

// rewardBufs are one pooled reward instance's guest buffers.
type rewardBufs struct {
	cap                                    int // transitions the buffers hold
	od, ad                                 int
	obs, actions, nextObs, envRewards, out uint32
}

// RewardBatch computes shaped rewards for n transitions (n = len(envRewards))
// with a pooled instance of a reward plugin. Safe for concurrent use.
func (m *Module) RewardBatch(ctx context.Context, obsDim, actDim int, obs, actions, nextObs, envRewards, out []float32) error {
	if m.meta.Kind != KindReward {
		return fmt.Errorf("plugin %s: reward_batch: kind is %q, not reward", m.label, m.meta.Kind)
	}
	n := len(envRewards)
	if obsDim < 1 || actDim < 1 || obsDim > m.limits.MaxDim || actDim > m.limits.MaxDim || n > m.limits.MaxEnvs ||
		len(obs) != n*obsDim || len(nextObs) != n*obsDim || len(actions) != n*actDim || len(out) != n {
		return fmt.Errorf("plugin %s: reward_batch: sizes obs=%d actions=%d next_obs=%d env_rewards=%d out=%d do not fit obs_dim=%d act_dim=%d",
			m.label, len(obs), len(actions), len(nextObs), n, len(out), obsDim, actDim)
	}
	if n == 0 {
		return nil
	}
	in, err := m.acquire(ctx)
	if err != nil {
		return err
	}
	defer m.release(in)
	b, err := in.rewardBuffers(ctx, n, obsDim, actDim)
	if err != nil {
		return err
	}
	copy(in.f32At(b.obs, n*obsDim), obs)
	copy(in.f32At(b.actions, n*actDim), actions)
	copy(in.f32At(b.nextObs, n*obsDim), nextObs)
	copy(in.f32At(b.envRewards, n), envRewards)
	s := &in.stack
	s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7] = uint64(n), uint64(obsDim), uint64(actDim), uint64(b.obs), uint64(b.actions), uint64(b.nextObs), uint64(b.envRewards), uint64(b.out)
	if err := in.callStatus(ctx, fnRewardBatch, 8, m.limits.CallTimeout); err != nil {
		return err
	}
	copy(out, in.f32At(b.out, n))
	return nil
}

// rewardBuffers inits a fresh instance and (re)allocates buffers that fit.
func (in *instance) rewardBuffers(ctx context.Context, n, od, ad int) (*rewardBufs, error) {
	b := in.reward
	if b == nil {
		in.stack[0], in.stack[1] = 1, 0
		if err := in.callStatus(ctx, fnInit, 2, in.m.limits.InitTimeout); err != nil {
			return nil, err
		}
		b = &rewardBufs{}
		in.reward = b
	}
	if n <= b.cap && od == b.od && ad == b.ad {
		return b, nil
	}
	c := max(n, 2*b.cap) // grow geometrically
	if c > in.m.limits.MaxEnvs {
		c = n
	}
	if b.cap > 0 {
		if err := in.free(ctx, b.obs, b.actions, b.nextObs, b.envRewards, b.out); err != nil {
			return nil, err
		}
		b.cap = 0
	}
	sizes := []int{4 * c * od, 4 * c * ad, 4 * c * od, 4 * c, 4 * c}
	ptrs := []*uint32{&b.obs, &b.actions, &b.nextObs, &b.envRewards, &b.out}
	for i, size := range sizes {
		p, err := in.alloc(ctx, size)
		if err != nil {
			return nil, err
		}
		*ptrs[i] = p
	}
	b.cap, b.od, b.ad = c, od, ad
	return b, nil
}

// ShapedVecEnv composes an env with a reward plugin: rewards from Step are
// replaced by reward_batch(obs, action, next_obs, env_reward), where next_obs
// is the final observation for environments that just finished.
type ShapedVecEnv struct {
	envs.VecEnv
	ctx        context.Context
	reward     *Module
	prev, next []float32
	envRewards []float32
	od, ad     int
}

// Shape wraps env with the reward plugin r.
func Shape(ctx context.Context, env envs.VecEnv, r *Module) (*ShapedVecEnv, error) {
	if r.meta.Kind != KindReward {
		return nil, fmt.Errorf("plugin %s: shape: kind is %q, not reward", r.label, r.meta.Kind)
	}
	sp := env.Spec()
	od, ad, n := sp.Observation.Dim(), sp.Action.Dim(), env.NumEnvs()
	if d := r.meta.Observation.Dim(); r.meta.Observation.Kind != "" && d != od {
		return nil, fmt.Errorf("plugin %s: shape %s: observation dim %d, plugin wants %d", r.label, sp.Name, od, d)
	}
	return &ShapedVecEnv{VecEnv: env, ctx: ctx, reward: r, prev: make([]float32, n*od), next: make([]float32, n*od),
		envRewards: make([]float32, n), od: od, ad: ad}, nil
}

func (s *ShapedVecEnv) Reset(seed uint64, obs []float32) error {
	if err := s.VecEnv.Reset(seed, obs); err != nil {
		return err
	}
	copy(s.prev, obs)
	return nil
}

func (s *ShapedVecEnv) Step(actions, obs, rewards []float32, terminated, truncated []bool, finalObs []float32) error {
	if err := s.VecEnv.Step(actions, obs, s.envRewards, terminated, truncated, finalObs); err != nil {
		return err
	}
	copy(s.next, obs)
	for i := range terminated {
		if terminated[i] || truncated[i] {
			copy(s.next[i*s.od:(i+1)*s.od], finalObs[i*s.od:(i+1)*s.od])
		}
	}
	if err := s.reward.RewardBatch(s.ctx, s.od, s.ad, s.prev, actions, s.next, s.envRewards, rewards); err != nil {
		return err
	}
	for i, r := range rewards {
		if math.IsNaN(float64(r)) || math.IsInf(float64(r), 0) {
			return fmt.Errorf("plugin %s: reward_batch: %w: reward %d is %v", s.reward.label, ErrProtocol, i, r)
		}
	}
	copy(s.prev, obs)
	return nil
}
