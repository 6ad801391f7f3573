// Package ppo is Trainyard's built-in learner: Proximal Policy Optimization
// (Schulman et al. 2017) in pure Go over any envs.VecEnv. Separate tanh MLPs
// for the policy and the value, Adam, GAE(λ), the clipped surrogate, a value
// loss and an entropy bonus; categorical actions for Discrete spaces and a
// diagonal Gaussian with a learned state-independent log-std for Box spaces
// (actions clipped to the box). Observations (and optionally rewards) are
// normalised with running statistics. Rollout inference is batched across
// the VecEnv's instances; minibatch gradients are split over Workers
// goroutines and summed in a fixed order, so a run is reproducible bit for
// bit and a checkpoint (Save/Restore) resumes it exactly.
package ppo

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/trainyard/trainyard/internal/nn"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Metrics describe one iteration (a rollout and the updates on it).
type Metrics struct {
	Iteration int64 `json:"iteration"`
	Timesteps int64 `json:"timesteps"`
	// Episodes finished during this iteration's rollout and their
	// undiscounted, unnormalised returns (zero when none finished).
	Episodes          int     `json:"episodes"`
	EpisodeReturnMean float64 `json:"episode_return_mean"`
	EpisodeReturnMin  float64 `json:"episode_return_min"`
	EpisodeReturnMax  float64 `json:"episode_return_max"`
	EpisodeLengthMean float64 `json:"episode_length_mean"`
	// RecentReturnMean averages the last Config.ReturnWindow episodes
	// (across iterations); RecentEpisodes is how many that is.
	RecentReturnMean float64 `json:"recent_return_mean"`
	RecentEpisodes   int     `json:"recent_episodes"`
	// StepsPerSecond is env steps over the iteration's wall time (rollout
	// and update); RolloutStepsPerSecond over the rollout alone.
	StepsPerSecond        float64 `json:"steps_per_second"`
	RolloutStepsPerSecond float64 `json:"rollout_steps_per_second"`
	// Losses and diagnostics averaged over the iteration's minibatches.
	PolicyLoss        float64 `json:"policy_loss"`
	ValueLoss         float64 `json:"value_loss"`
	Entropy           float64 `json:"entropy"`
	ApproxKL          float64 `json:"approx_kl"`
	ClipFraction      float64 `json:"clip_fraction"`
	ExplainedVariance float64 `json:"explained_variance"`
	GradNorm          float64 `json:"grad_norm"`
	LearningRate      float64 `json:"learning_rate"`
	Minibatches       int     `json:"minibatches"`
	// Rollouts name the fragments a distributed iteration learnt from
	// (absent when the learner stepped its own envs).
	Rollouts []RolloutInfo `json:"rollouts,omitempty"`
}

// Learner trains a policy on one VecEnv. Not safe for concurrent use.
type Learner struct {
	cfg  Config
	env  envs.VecEnv
	spec envs.Spec

	nEnv, od, ad int
	discrete     bool
	masked       bool      // the env's observations end in an action mask
	frozen       bool      // a multi-agent run's untrained policy: its statistics stay too
	nAct         int       // network action width: N logits or the Box dim
	actLow       []float32 // Box bounds for clipping
	actHigh      []float32

	pi, vf       nn.MLP
	params       []float64 // [policy | value | log-std]
	piOff, vfOff int
	stdOff       int
	adam         *nn.Adam
	pcg          *rand.PCG
	rng          *rand.Rand

	obsRMS runningMeanStd
	retRMS runningMeanStd // 1-dim, over discounted returns
	ret    []float64      // per-env discounted return for reward scaling

	// Env-facing buffers: the current observation is part of the state.
	obs, finalObs, rewards []float32
	actions                []float32
	term, trunc            []bool
	epRet                  []float64
	epLen                  []int64
	recent                 returnWindow

	iteration, timesteps int64

	buf     rollout
	workers []*worker
	grad    []float64
	perm    []int
	scratch []float64 // obs-dim scratch for statistics
	normObs []float64 // nEnv × od
	finNorm []float64 // normalised final observations, for bootstrapping

	// track records what a rollout worker sends besides the rollout (nil
	// on the in-process path, which never reads or writes it).
	track *fragTrack
	// lastLearn is when the previous Learn returned (distributed trainer).
	lastLearn time.Time
}

// rollout is one iteration's transitions, time-major (t·nEnv + env).
type rollout struct {
	obs        []float64 // normalised, T·N × od
	actions    []float64 // T·N × ad (discrete: the index)
	logp       []float64
	values     []float64
	rewards    []float64 // scaled, truncation-bootstrapped
	dones      []float64 // 1 where the episode ended at this step
	advantages []float64
	returns    []float64
	mask       []bool // T·N × nAct legal actions (masked envs only)
}

// worker owns one goroutine's share of a minibatch.
type worker struct {
	piWS, vfWS *nn.Workspace
	grad       []float64
	x          []float64 // gathered obs
	dOut, dV   []float64
	stats      mbStats
}

type mbStats struct{ pg, v, ent, kl, clip float64 }

// New builds a learner for env, initialises its networks from cfg.Seed and
// resets env with cfg.Seed.
func New(env envs.VecEnv, cfg Config) (*Learner, error) {
	l, err := build(env, cfg)
	if err != nil {
		return nil, err
	}
	init := rand.New(rand.NewPCG(cfg.Seed, 0x5EED_1417))
	l.pi.Init(l.params[l.piOff:l.vfOff], init, math.Sqrt2, 0.01)
	l.vf.Init(l.params[l.vfOff:l.stdOff], init, math.Sqrt2, 1)
	if !l.discrete {
		for i := range l.params[l.stdOff:] {
			l.params[l.stdOff+i] = cfg.InitLogStd
		}
	}
	if err := env.Reset(cfg.Seed, l.obs); err != nil {
		return nil, fmt.Errorf("ppo: reset %s: %w", l.spec.Name, err)
	}
	return l, nil
}

// build sizes everything for env and cfg without initialising weights.
func build(env envs.VecEnv, cfg Config) (*Learner, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("ppo: config: %w", err)
	}
	spec := env.Spec()
	l := &Learner{cfg: cfg, env: env, spec: spec, nEnv: env.NumEnvs(), od: spec.Observation.Dim()}
	if spec.Observation.Kind != envs.Box {
		return nil, fmt.Errorf("ppo: %s: observation space %q unsupported (need box)", spec.Name, spec.Observation.Kind)
	}
	switch spec.Action.Kind {
	case envs.Discrete:
		if spec.Action.N < 2 {
			return nil, fmt.Errorf("ppo: %s: discrete action space with n = %d", spec.Name, spec.Action.N)
		}
		l.discrete, l.ad, l.nAct = true, 1, spec.Action.N
		l.masked = spec.ActionMask
		if l.masked && l.od < l.nAct {
			return nil, fmt.Errorf("ppo: %s: an action mask of %d values does not fit observations of %d", spec.Name, l.nAct, l.od)
		}
	case envs.Box:
		l.ad = spec.Action.Dim()
		l.nAct = l.ad
		if len(spec.Action.Low) != l.ad || len(spec.Action.High) != l.ad {
			return nil, fmt.Errorf("ppo: %s: box action bounds have %d/%d values, want %d", spec.Name, len(spec.Action.Low), len(spec.Action.High), l.ad)
		}
		l.actLow, l.actHigh = spec.Action.Low, spec.Action.High
	default:
		return nil, fmt.Errorf("ppo: %s: action space %q unsupported", spec.Name, spec.Action.Kind)
	}
	if w := max(l.od, l.ad); cfg.NumSteps*l.nEnv > maxRollout/max(w, 1) {
		return nil, fmt.Errorf("ppo: rollout of %d steps × %d envs × %d values is too large", cfg.NumSteps, l.nEnv, w)
	}
	sizes := func(out int) []int {
		s := append([]int{l.od}, cfg.Hidden...)
		return append(s, out)
	}
	var err error
	if l.pi, err = nn.NewMLP(sizes(l.nAct)...); err != nil {
		return nil, fmt.Errorf("ppo: policy: %w", err)
	}
	if l.vf, err = nn.NewMLP(sizes(1)...); err != nil {
		return nil, fmt.Errorf("ppo: value: %w", err)
	}
	l.piOff, l.vfOff = 0, l.pi.NumParams()
	l.stdOff = l.vfOff + l.vf.NumParams()
	nParams := l.stdOff
	if !l.discrete {
		nParams += l.ad
	}
	l.params = make([]float64, nParams)
	l.grad = make([]float64, nParams)
	l.adam = nn.NewAdam(nParams, cfg.AdamEps)
	l.pcg = rand.NewPCG(cfg.Seed, 0xAC7_5A3B1E)
	l.rng = rand.New(l.pcg)
	l.obsRMS = newRunningMeanStd(l.od)
	l.retRMS = newRunningMeanStd(1)
	n := l.nEnv
	l.ret = make([]float64, n)
	l.obs, l.finalObs = make([]float32, n*l.od), make([]float32, n*l.od)
	l.rewards, l.actions = make([]float32, n), make([]float32, n*l.ad)
	l.term, l.trunc = make([]bool, n), make([]bool, n)
	l.epRet, l.epLen = make([]float64, n), make([]int64, n)
	l.recent = newReturnWindow(cfg.ReturnWindow)
	l.scratch = make([]float64, 2*max(l.od, 1))
	l.normObs, l.finNorm = make([]float64, n*l.od), make([]float64, n*l.od)

	T := cfg.NumSteps * n
	l.buf = rollout{
		obs: make([]float64, T*l.od), actions: make([]float64, T*l.ad),
		logp: make([]float64, T), values: make([]float64, T), rewards: make([]float64, T),
		dones: make([]float64, T), advantages: make([]float64, T), returns: make([]float64, T),
	}
	if l.masked {
		l.buf.mask = make([]bool, T*l.nAct)
	}
	l.perm = make([]int, T)
	mb := min(cfg.MinibatchSize, T)
	shard := (mb + cfg.Workers - 1) / cfg.Workers
	// Rollout inference runs on worker 0's workspaces: size them for both.
	wsN := max(shard, n)
	for range cfg.Workers {
		l.workers = append(l.workers, &worker{
			piWS: l.pi.NewWorkspace(wsN), vfWS: l.vf.NewWorkspace(wsN),
			grad: make([]float64, nParams),
			x:    make([]float64, wsN*l.od),
			dOut: make([]float64, wsN*l.nAct), dV: make([]float64, wsN),
		})
	}
	return l, nil
}

// Config returns the learner's hyper-parameters.
func (l *Learner) Config() Config { return l.cfg }

// Counters returns the iterations completed and env steps taken.
func (l *Learner) Counters() (iteration, timesteps int64) { return l.iteration, l.timesteps }

// Params returns a copy of all weights: policy MLP, value MLP, then the
// Gaussian log-std (absent for discrete actions).
func (l *Learner) Params() []float64 { return append([]float64(nil), l.params...) }

// progress is the fraction of the annealing horizon left (1 without
// annealing).
func (l *Learner) progress() float64 {
	if l.cfg.AnnealSteps <= 0 {
		return 1
	}
	return max(0, 1-float64(l.timesteps)/float64(l.cfg.AnnealSteps))
}

// Iterate collects one rollout of NumSteps per env, then runs the PPO
// epochs on it. ctx is checked between env steps and minibatches.
func (l *Learner) Iterate(ctx context.Context) (Metrics, error) {
	start := time.Now()
	m := Metrics{LearningRate: l.cfg.LearningRate * l.progress()}
	if err := l.collect(ctx, &m); err != nil {
		return m, err
	}
	err := l.learn(ctx, &m, start, time.Since(start))
	return m, err
}

// learn runs the PPO epochs on the rollout just collected (which took
// rolloutDur of the iteration begun at start) and completes m.
func (l *Learner) learn(ctx context.Context, m *Metrics, start time.Time, rolloutDur time.Duration) error {
	l.computeGAE()
	if err := l.update(ctx, m); err != nil {
		return err
	}
	l.iteration++
	steps := float64(l.cfg.NumSteps * l.nEnv)
	m.Iteration, m.Timesteps = l.iteration, l.timesteps
	m.StepsPerSecond = steps / time.Since(start).Seconds()
	m.RolloutStepsPerSecond = steps / rolloutDur.Seconds()
	l.finishRecent(m)
	return nil
}

// finishRecent sets m's recent-returns window.
func (l *Learner) finishRecent(m *Metrics) { l.recent.fill(m) }

// collect runs the rollout into l.buf.
func (l *Learner) collect(ctx context.Context, m *Metrics) error {
	var lenSum int64
	m.EpisodeReturnMin, m.EpisodeReturnMax = math.Inf(1), math.Inf(-1)
	for t := 0; t < l.cfg.NumSteps; t++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("ppo: rollout: %w", err)
		}
		l.actStep(t)
		if err := l.env.Step(l.actions, l.obs, l.rewards, l.term, l.trunc, l.finalObs); err != nil {
			return fmt.Errorf("ppo: step %s: %w", l.spec.Name, err)
		}
		l.recordStep(t, m, &lenSum)
	}
	l.endRollout(m, lenSum)
	return nil
}

// actStep samples step t's actions for l.obs into l.actions and records
// the step's observations, actions, log-probabilities and values.
func (l *Learner) actStep(t int) {
	n, od, ad := l.nEnv, l.od, l.ad
	w := l.workers[0]
	if l.cfg.NormalizeObs && !l.frozen {
		l.obsRMS.update(l.obs, n, l.scratch)
		if l.track != nil {
			l.track.obs.update(l.obs, n, l.scratch)
		}
	}
	row := t * n
	x := l.buf.obs[row*od : (row+n)*od]
	l.normalizeObs(x, l.obs, n)
	out := l.pi.Forward(l.params[l.piOff:l.vfOff], w.piWS, x, n)
	vals := l.vf.Forward(l.params[l.vfOff:l.stdOff], w.vfWS, x, n)
	copy(l.buf.values[row:row+n], vals)
	acts := l.buf.actions[row*ad : (row+n)*ad]
	for i := 0; i < n; i++ {
		if l.masked {
			r := row + i
			maskLogits(out[i*l.nAct:(i+1)*l.nAct], l.rowMask(l.obs, i), l.buf.mask[r*l.nAct:(r+1)*l.nAct])
		}
		l.buf.logp[row+i] = l.sample(out[i*l.nAct:(i+1)*l.nAct], acts[i*ad:(i+1)*ad], l.actions[i*ad:(i+1)*ad])
	}
}

// recordStep takes step t's outcome from l.rewards, l.term, l.trunc and
// l.finalObs (l.obs already holds the next observations).
func (l *Learner) recordStep(t int, m *Metrics, lenSum *int64) {
	n := l.nEnv
	row := t * n
	l.timesteps += int64(n)
	rew := l.buf.rewards[row : row+n]
	dones := l.buf.dones[row : row+n]
	l.scaleRewards(rew)
	bootstrap := false
	for i := 0; i < n; i++ {
		l.epRet[i] += float64(l.rewards[i])
		l.epLen[i]++
		dones[i] = 0
		if l.track != nil {
			l.track.term[row+i], l.track.trunc[row+i] = l.term[i], l.trunc[i]
		}
		if l.term[i] || l.trunc[i] {
			dones[i] = 1
			bootstrap = bootstrap || (l.trunc[i] && !l.term[i])
			l.finishEpisode(i, m, lenSum)
		}
	}
	if bootstrap {
		l.bootstrapTruncated(rew)
	}
}

// endRollout turns the rollout's episode sums into means.
func (l *Learner) endRollout(m *Metrics, lenSum int64) {
	if m.Episodes > 0 {
		m.EpisodeReturnMean /= float64(m.Episodes)
		m.EpisodeLengthMean = float64(lenSum) / float64(m.Episodes)
	} else {
		m.EpisodeReturnMin, m.EpisodeReturnMax = 0, 0
	}
}

func (l *Learner) normalizeObs(dst []float64, obs []float32, n int) {
	clip := 0.0
	if l.cfg.NormalizeObs {
		clip = l.cfg.ObsClip
	}
	l.obsRMS.normalize(dst, obs, n, clip)
}

// scaleRewards writes the step's rewards into rew, divided by the running
// std of each env's discounted return when reward normalisation is on (as
// SB3's VecNormalize: the statistics take the whole batch of returns).
func (l *Learner) scaleRewards(rew []float64) {
	for i, r := range l.rewards {
		rew[i] = float64(r)
	}
	if !l.cfg.NormalizeReward {
		return
	}
	for i, r := range rew {
		l.ret[i] = l.ret[i]*l.cfg.Gamma + r
	}
	l.retRMS.updateF64(l.ret, len(l.ret), l.scratch)
	if l.track != nil {
		l.track.ret.updateF64(l.ret, len(l.ret), l.scratch)
	}
	inv := 1 / math.Sqrt(l.retRMS.Var[0]+1e-8)
	for i, r := range rew {
		rew[i] = min(max(r*inv, -l.cfg.RewardClip), l.cfg.RewardClip)
		if l.term[i] || l.trunc[i] {
			l.ret[i] = 0
		}
	}
}

func (l *Learner) finishEpisode(i int, m *Metrics, lenSum *int64) {
	r := l.epRet[i]
	m.countEpisode(r)
	*lenSum += l.epLen[i]
	l.recent.add(r)
	if l.track != nil {
		l.track.epRet = append(l.track.epRet, r)
		l.track.epLen = append(l.track.epLen, l.epLen[i])
	}
	l.epRet[i], l.epLen[i] = 0, 0
}

// bootstrapTruncated adds γ·V(final obs) to the reward of every env that was
// cut off by a time limit rather than terminated: the episode would have
// gone on, so its value is not zero (as SB3 does).
func (l *Learner) bootstrapTruncated(rew []float64) {
	n, od := l.nEnv, l.od
	l.normalizeObs(l.finNorm, l.finalObs, n)
	// All n rows are evaluated (finalObs rows of unfinished envs hold stale
	// data and are ignored): one batched call beats n single ones.
	w := l.workers[0]
	vals := l.vf.Forward(l.params[l.vfOff:l.stdOff], w.vfWS, l.finNorm[:n*od], n)
	for i := 0; i < n; i++ {
		if l.trunc[i] && !l.term[i] {
			rew[i] += l.cfg.Gamma * vals[i]
		}
	}
}

// sample draws an action from the policy head output, stores its network
// form in stored (discrete: index; Gaussian: unclipped) and its env form in
// envAct (Gaussian: clipped to the box), and returns its log-probability.
func (l *Learner) sample(out, stored []float64, envAct []float32) float64 {
	if l.discrete {
		lse := logSumExp(out)
		u := l.rng.Float64()
		k := len(out) - 1
		var c float64
		for j, z := range out {
			c += math.Exp(z - lse)
			if u < c {
				k = j
				break
			}
		}
		stored[0], envAct[0] = float64(k), float32(k)
		return out[k] - lse
	}
	logStd := l.params[l.stdOff:]
	var logp float64
	for d, mu := range out {
		eps := l.rng.NormFloat64()
		a := mu + math.Exp(logStd[d])*eps
		stored[d] = a
		envAct[d] = min(max(float32(a), l.actLow[d]), l.actHigh[d])
		logp += -0.5*eps*eps - logStd[d] - halfLog2Pi
	}
	return logp
}

var halfLog2Pi = 0.5 * math.Log(2*math.Pi)

func logSumExp(z []float64) float64 {
	m := math.Inf(-1)
	for _, v := range z {
		m = max(m, v)
	}
	var s float64
	for _, v := range z {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

// computeGAE fills advantages and returns with GAE(λ), bootstrapping the
// last step from the value of the current observation.
func (l *Learner) computeGAE() {
	l.gae(l.nextValues())
}

// nextValues is V of the current (normalised) observations.
func (l *Learner) nextValues() []float64 {
	l.normalizeObs(l.normObs, l.obs, l.nEnv)
	return l.vf.Forward(l.params[l.vfOff:l.stdOff], l.workers[0].vfWS, l.normObs, l.nEnv)
}

// gae fills advantages and returns from the rollout in l.buf, bootstrapping
// each env's last step from next.
func (l *Learner) gae(next []float64) {
	n, T := l.nEnv, l.cfg.NumSteps
	b := &l.buf
	g, lam := l.cfg.Gamma, l.cfg.Lambda
	for i := 0; i < n; i++ {
		nextV, gae := next[i], 0.0
		for t := T - 1; t >= 0; t-- {
			k := t*n + i
			nonTerm := 1 - b.dones[k]
			delta := b.rewards[k] + g*nextV*nonTerm - b.values[k]
			gae = delta + g*lam*nonTerm*gae
			b.advantages[k] = gae
			b.returns[k] = gae + b.values[k]
			nextV = b.values[k]
		}
	}
}

// update runs the PPO epochs over the rollout.
func (l *Learner) update(ctx context.Context, m *Metrics) error {
	total := len(l.perm)
	frac := l.progress()
	lr, clip := l.cfg.LearningRate*frac, l.cfg.ClipCoef*frac
	if frac == 0 { // keep a valid clip range once annealing ends
		clip = 1e-8
	}
	var sum mbStats
	var gradNorm float64
	mbs := 0
	for epoch := 0; epoch < l.cfg.Epochs; epoch++ {
		for i := range l.perm {
			l.perm[i] = i
		}
		l.rng.Shuffle(total, func(i, j int) { l.perm[i], l.perm[j] = l.perm[j], l.perm[i] })
		stop := false
		for lo := 0; lo < total; lo += l.cfg.MinibatchSize {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("ppo: update: %w", err)
			}
			idx := l.perm[lo:min(lo+l.cfg.MinibatchSize, total)]
			st := l.minibatch(idx, clip)
			gradNorm += nn.ClipGradNorm(l.grad, l.cfg.MaxGradNorm)
			l.adam.Update(l.params, l.grad, lr)
			sum.pg += st.pg
			sum.v += st.v
			sum.ent += st.ent
			sum.kl += st.kl
			sum.clip += st.clip
			mbs++
			if l.cfg.TargetKL > 0 && st.kl > l.cfg.TargetKL {
				stop = true
				break
			}
		}
		if stop {
			break
		}
	}
	k := float64(mbs)
	m.PolicyLoss, m.ValueLoss, m.Entropy = sum.pg/k, sum.v/k, sum.ent/k
	m.ApproxKL, m.ClipFraction, m.GradNorm = sum.kl/k, sum.clip/k, gradNorm/k
	m.Minibatches = mbs
	m.ExplainedVariance = explainedVariance(l.buf.values, l.buf.returns)
	return nil
}

// minibatch computes the loss gradient over idx into l.grad and returns the
// minibatch's mean statistics. Shards of idx go to the workers; their
// gradients are summed in worker order so the result does not depend on
// scheduling.
func (l *Learner) minibatch(idx []int, clip float64) mbStats {
	// Advantage normalisation over the whole minibatch.
	var mean, sq float64
	for _, k := range idx {
		mean += l.buf.advantages[k]
	}
	mean /= float64(len(idx))
	for _, k := range idx {
		d := l.buf.advantages[k] - mean
		sq += d * d
	}
	std := math.Sqrt(sq / float64(max(len(idx)-1, 1)))
	B := len(idx)
	nw := len(l.workers)
	shard := (B + nw - 1) / nw
	var wg sync.WaitGroup
	for wi, w := range l.workers {
		lo, hi := min(wi*shard, B), min((wi+1)*shard, B)
		if wi == nw-1 {
			l.shardGrad(w, idx[lo:hi], B, mean, std, clip)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.shardGrad(w, idx[lo:hi], B, mean, std, clip)
		}()
	}
	wg.Wait()
	clear(l.grad)
	var st mbStats
	for _, w := range l.workers {
		for i, g := range w.grad {
			l.grad[i] += g
		}
		st.pg += w.stats.pg
		st.v += w.stats.v
		st.ent += w.stats.ent
		st.kl += w.stats.kl
		st.clip += w.stats.clip
	}
	fb := float64(B)
	st.pg, st.v, st.ent, st.kl, st.clip = st.pg/fb, st.v/fb, st.ent/fb, st.kl/fb, st.clip/fb
	return st
}

// shardGrad computes the gradient of the minibatch-mean loss restricted to
// the samples idx into w.grad (B is the whole minibatch's size).
//
// Loss per sample: max(-A·r, -A·clip(r, 1±ε)) - c_ent·H + c_v·½(V-R)².
func (l *Learner) shardGrad(w *worker, idx []int, B int, advMean, advStd, clip float64) {
	clear(w.grad)
	w.stats = mbStats{}
	n := len(idx)
	if n == 0 {
		return
	}
	od, ad, na := l.od, l.ad, l.nAct
	b := &l.buf
	for s, k := range idx {
		copy(w.x[s*od:(s+1)*od], b.obs[k*od:(k+1)*od])
	}
	piP, vfP := l.params[l.piOff:l.vfOff], l.params[l.vfOff:l.stdOff]
	out := l.pi.Forward(piP, w.piWS, w.x, n)
	vals := l.vf.Forward(vfP, w.vfWS, w.x, n)
	invB := 1 / float64(B)
	entC, vC := l.cfg.EntropyCoef, l.cfg.ValueCoef
	var logStd, gStd []float64
	if !l.discrete {
		logStd, gStd = l.params[l.stdOff:], w.grad[l.stdOff:]
	}
	for s, k := range idx {
		adv := (b.advantages[k] - advMean) / (advStd + 1e-8)
		o := out[s*na : (s+1)*na]
		if b.mask != nil {
			applyKept(o, b.mask[k*na:(k+1)*na])
		}
		d := w.dOut[s*na : (s+1)*na]
		act := b.actions[k*ad : (k+1)*ad]
		var logp, ent float64
		if l.discrete {
			lse := logSumExp(o)
			a := int(act[0])
			logp = o[a] - lse
			for _, z := range o {
				p := math.Exp(z - lse)
				ent -= p * (z - lse)
			}
		} else {
			for j, mu := range o {
				z := (act[j] - mu) / math.Exp(logStd[j])
				logp += -0.5*z*z - logStd[j] - halfLog2Pi
				ent += logStd[j] + 0.5 + halfLog2Pi
			}
		}
		logRatio := logp - b.logp[k]
		ratio := math.Exp(logRatio)
		pg1, pg2 := -adv*ratio, -adv*min(max(ratio, 1-clip), 1+clip)
		// dLoss/dlogp: the unclipped branch carries the gradient when it
		// is the max; a clipped branch is constant.
		var gLogp float64
		if pg1 >= pg2 {
			gLogp = -adv * ratio * invB
		}
		gEnt := -entC * invB
		if l.discrete {
			lse := logSumExp(o)
			a := int(act[0])
			for j, z := range o {
				p := math.Exp(z - lse)
				dl := -p
				if j == a {
					dl++
				}
				// dH/dz_j = -p_j (log p_j + H).
				d[j] = gLogp*dl + gEnt*(-p*((z-lse)+ent))
			}
		} else {
			for j, mu := range o {
				inv := math.Exp(-logStd[j])
				z := (act[j] - mu) * inv
				d[j] = gLogp * z * inv
				gStd[j] += gLogp*(z*z-1) + gEnt
			}
		}
		v := vals[s]
		w.dV[s] = vC * (v - b.returns[k]) * invB
		w.stats.pg += max(pg1, pg2)
		w.stats.v += 0.5 * (v - b.returns[k]) * (v - b.returns[k])
		w.stats.ent += ent
		w.stats.kl += (ratio - 1) - logRatio
		if math.Abs(ratio-1) > clip {
			w.stats.clip++
		}
	}
	l.pi.Backward(piP, w.grad[l.piOff:l.vfOff], w.piWS, w.dOut[:n*na], n)
	l.vf.Backward(vfP, w.grad[l.vfOff:l.stdOff], w.vfWS, w.dV[:n], n)
}

// explainedVariance is 1 - Var(returns - values)/Var(returns).
func explainedVariance(values, returns []float64) float64 {
	var mr, md float64
	for i := range returns {
		mr += returns[i]
		md += returns[i] - values[i]
	}
	fn := float64(len(returns))
	mr, md = mr/fn, md/fn
	var vr, vd float64
	for i := range returns {
		a, b := returns[i]-mr, returns[i]-values[i]-md
		vr += a * a
		vd += b * b
	}
	if vr == 0 {
		return 0 // undefined; 0 keeps Metrics JSON-encodable
	}
	return 1 - vd/vr
}

// returnWindow is the ring of the last len(buf) episode returns: the
// run's stop criterion and its recent_return_mean.
type returnWindow struct {
	buf     []float64
	next, n int // n: returns added, ever
}

func newReturnWindow(size int) returnWindow { return returnWindow{buf: make([]float64, size)} }

func (w *returnWindow) add(r float64) {
	w.buf[w.next] = r
	w.next = (w.next + 1) % len(w.buf)
	w.n++
}

// fill sets m's RecentEpisodes and RecentReturnMean.
func (w *returnWindow) fill(m *Metrics) {
	m.RecentEpisodes = min(w.n, len(w.buf))
	if m.RecentEpisodes > 0 {
		var s float64
		for _, r := range w.buf[:m.RecentEpisodes] {
			s += r
		}
		m.RecentReturnMean = s / float64(m.RecentEpisodes)
	}
}

// restore puts back a window Save wrote; false when it does not fit.
func (w *returnWindow) restore(buf []float64, next, n int) bool {
	if len(buf) != len(w.buf) || next < 0 || next >= len(w.buf) || n < 0 {
		return false
	}
	copy(w.buf, buf)
	w.next, w.n = next, n
	return true
}

// countEpisode adds one ended episode's return to m's sums (Episodes,
// the mean's numerator, min and max).
func (m *Metrics) countEpisode(r float64) {
	m.Episodes++
	m.EpisodeReturnMean += r
	m.EpisodeReturnMin = min(m.EpisodeReturnMin, r)
	m.EpisodeReturnMax = max(m.EpisodeReturnMax, r)
}
