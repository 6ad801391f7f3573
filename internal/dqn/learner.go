// Package dqn is the algorithm "dqn": deep Q-learning (Mnih et al. 2015)
// with a replay buffer, a target network, double Q-learning, random
// steps before learning starts, a train frequency, a linear epsilon
// schedule and a greedy evaluation apart from training, after CleanRL's
// single-file DQN and rl-baselines3-zoo's numbers. It is the worked
// example of an off-policy algorithm on the learner interface
// (docs/architecture.md): this package and one import line in
// cmd/trainyard.
package dqn

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/nn"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Learner trains a Q network on a discrete-action env. Single goroutine:
// a step's batch is small and the env steps between them.
type Learner struct {
	cfg  Config
	env  envs.VecEnv
	open func(ctx context.Context, n int, seed uint64) (envs.VecEnv, error)
	spec envs.Spec
	nEnv int
	od   int
	nAct int

	q              nn.MLP
	params, target []float64
	grad           []float64
	adam           *nn.Adam
	pcg            *rand.PCG
	rng            *rand.Rand
	buf            replay

	obs, next, fin, rew, acts []float32
	term, trunc               []bool
	epRet                     []float64
	epLen                     []int64
	recent                    []float64
	recentNext, recentN       int

	iteration, timesteps, gradSteps int64
	// sinceTrain is env steps since the last training phase.
	sinceTrain int64
	// eval is the latest greedy evaluation (Episodes 0: none yet).
	eval learner.EvalResult

	// Scratch, sized once.
	xAct, xb, xn, dOut []float64
	wsAct, wsQ         *nn.Workspace
	wsN, wsT           *nn.Workspace
	idx                []int
}

// New returns a learner with fresh weights on env (reset with cfg.Seed).
// open, when set, makes fresh envs for the greedy evaluations.
func New(env envs.VecEnv, open func(context.Context, int, uint64) (envs.VecEnv, error), cfg Config) (*Learner, error) {
	l, err := build(env, open, cfg)
	if err != nil {
		return nil, err
	}
	init := rand.New(rand.NewPCG(cfg.Seed, 0xD0_5EED))
	l.q.Init(l.params, init, math.Sqrt2, 1)
	copy(l.target, l.params)
	if err := env.Reset(cfg.Seed, l.obs); err != nil {
		return nil, fmt.Errorf("dqn: reset %s: %w", l.spec.Name, err)
	}
	return l, nil
}

// build sizes everything for env and cfg without initialising weights.
func build(env envs.VecEnv, open func(context.Context, int, uint64) (envs.VecEnv, error), cfg Config) (*Learner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("dqn: config: %w", err)
	}
	spec := env.Spec()
	if err := checkSpaces(spec.Observation, spec.Action); err != nil {
		return nil, fmt.Errorf("dqn: %s: %w", spec.Name, err)
	}
	l := &Learner{cfg: cfg, env: env, open: open, spec: spec, nEnv: env.NumEnvs(), od: spec.Observation.Dim(), nAct: spec.Action.N}
	// A full buffer's size is known here, not at submission: the
	// obs width is the env's. Refuse one no node should be asked to hold.
	if need := int64(cfg.BufferSize) * int64(2*l.od+3); need > maxReplayValues {
		return nil, fmt.Errorf("dqn: buffer_size %d × %d observation values needs %d MiB, more than the %d MiB a replay buffer may hold", cfg.BufferSize, l.od, need*4>>20, maxReplayValues*4>>20)
	}
	sizes := append(append([]int{l.od}, cfg.Hidden...), l.nAct)
	q, err := nn.NewMLP(sizes...)
	if err != nil {
		return nil, fmt.Errorf("dqn: %w", err)
	}
	l.q = q
	np, n, od, b := q.NumParams(), l.nEnv, l.od, cfg.BatchSize
	l.params, l.target, l.grad = make([]float64, np), make([]float64, np), make([]float64, np)
	l.adam = nn.NewAdam(np, cfg.AdamEps)
	l.pcg = rand.NewPCG(cfg.Seed, 0xD0_0D)
	l.rng = rand.New(l.pcg)
	l.buf = newReplay(cfg.BufferSize, od)
	l.obs, l.next, l.fin = make([]float32, n*od), make([]float32, n*od), make([]float32, n*od)
	l.rew, l.acts = make([]float32, n), make([]float32, n)
	l.term, l.trunc = make([]bool, n), make([]bool, n)
	l.epRet, l.epLen = make([]float64, n), make([]int64, n)
	l.recent = make([]float64, cfg.ReturnWindow)
	l.xAct, l.wsAct = make([]float64, n*od), q.NewWorkspace(n)
	l.xb, l.xn, l.dOut = make([]float64, b*od), make([]float64, b*od), make([]float64, b*l.nAct)
	l.wsQ, l.wsN, l.wsT = q.NewWorkspace(b), q.NewWorkspace(b), q.NewWorkspace(b)
	l.idx = make([]int, b)
	return l, nil
}

// checkSpaces is what DQN trains: box observations, discrete actions.
func checkSpaces(obs, act envs.Space) error {
	if obs.Kind != envs.Box {
		return fmt.Errorf("dqn needs a box observation space, the env's is %q", obs.Kind)
	}
	if act.Kind != envs.Discrete || act.N < 2 {
		return fmt.Errorf("dqn needs a discrete action space of at least 2 actions, the env's is %q (n = %d); for continuous actions use ppo", act.Kind, act.N)
	}
	return nil
}

// Config is the learner's configuration.
func (l *Learner) Config() Config { return l.cfg }

// Counters are the iterations and env steps trained so far.
func (l *Learner) Counters() (iteration, timesteps int64) { return l.iteration, l.timesteps }

// epsilon is the exploration rate after t env steps.
func (l *Learner) epsilon(t int64) float64 {
	c := l.cfg
	if t >= c.ExplorationSteps {
		return c.FinalEps
	}
	return c.InitialEps + (c.FinalEps-c.InitialEps)*float64(t)/float64(c.ExplorationSteps)
}

// greedy writes the argmax-Q action of each of the n observations.
func (l *Learner) greedy(params []float64, ws *nn.Workspace, x []float64, obs, actions []float32, n int) {
	for i, v := range obs[:n*l.od] {
		x[i] = float64(v)
	}
	out := l.q.Forward(params, ws, x, n)
	for i := 0; i < n; i++ {
		actions[i] = float32(argmax(out[i*l.nAct : (i+1)*l.nAct]))
	}
}

func argmax(v []float64) int {
	best := 0
	for j, z := range v {
		if z > v[best] {
			best = j
		}
	}
	return best
}

// Iterate collects NumSteps steps on every env, training every TrainFreq
// env steps once LearningStarts have passed, then evaluates the greedy
// policy when the iteration is an EvalEvery one.
func (l *Learner) Iterate(ctx context.Context) (learner.Metrics, error) {
	start := time.Now()
	c, n, od := l.cfg, l.nEnv, l.od
	m := learner.Metrics{EpisodeReturnMin: math.Inf(1), EpisodeReturnMax: math.Inf(-1)}
	var epRetSum, epLenSum, lossSum, qSum, normSum float64
	steps := 0
	for s := 0; s < c.NumSteps; s++ {
		if err := ctx.Err(); err != nil {
			return m, fmt.Errorf("dqn: %w", err)
		}
		eps := l.epsilon(l.timesteps)
		l.greedy(l.params, l.wsAct, l.xAct, l.obs, l.acts, n)
		for i := range n {
			// One draw an env whatever happens, so the stream does not
			// depend on the network's choices.
			u := l.rng.Float64()
			r := l.rng.IntN(l.nAct)
			if l.timesteps < c.LearningStarts || u < eps {
				l.acts[i] = float32(r)
			}
		}
		if err := l.env.Step(l.acts, l.next, l.rew, l.term, l.trunc, l.fin); err != nil {
			return m, fmt.Errorf("dqn: step %s: %w", l.spec.Name, err)
		}
		for i := range n {
			next := l.next[i*od : (i+1)*od]
			done := l.term[i] || l.trunc[i]
			if done {
				next = l.fin[i*od : (i+1)*od]
			}
			l.buf.add(l.obs[i*od:(i+1)*od], next, int32(l.acts[i]), l.rew[i], l.term[i])
			l.epRet[i] += float64(l.rew[i])
			l.epLen[i]++
			if done {
				m.Episodes++
				epRetSum += l.epRet[i]
				epLenSum += float64(l.epLen[i])
				m.EpisodeReturnMin = min(m.EpisodeReturnMin, l.epRet[i])
				m.EpisodeReturnMax = max(m.EpisodeReturnMax, l.epRet[i])
				l.recent[l.recentNext] = l.epRet[i]
				l.recentNext = (l.recentNext + 1) % len(l.recent)
				l.recentN = min(l.recentN+1, len(l.recent))
				l.epRet[i], l.epLen[i] = 0, 0
			}
		}
		l.obs, l.next = l.next, l.obs
		l.timesteps += int64(n)
		if l.timesteps < c.LearningStarts {
			l.sinceTrain = 0
			continue
		}
		for l.sinceTrain += int64(n); l.sinceTrain >= int64(c.TrainFreq); l.sinceTrain -= int64(c.TrainFreq) {
			for range c.GradientSteps {
				loss, q, norm := l.trainStep()
				lossSum, qSum, normSum = lossSum+loss, qSum+q, normSum+norm
				steps++
			}
		}
	}
	l.iteration++
	m.Iteration, m.Timesteps = l.iteration, l.timesteps
	if m.Episodes > 0 {
		m.EpisodeReturnMean = epRetSum / float64(m.Episodes)
		m.EpisodeLengthMean = epLenSum / float64(m.Episodes)
	} else {
		m.EpisodeReturnMin, m.EpisodeReturnMax = 0, 0
	}
	m.Values = map[string]float64{
		"epsilon":        l.epsilon(l.timesteps),
		"learning_rate":  c.LearningRate,
		"buffer_size":    float64(l.buf.len()),
		"gradient_steps": float64(l.gradSteps),
	}
	if steps > 0 {
		m.Values["q_loss"] = lossSum / float64(steps)
		m.Values["q_mean"] = qSum / float64(steps)
		m.Values["grad_norm"] = normSum / float64(steps)
	}
	train := 0.0
	for _, r := range l.recent[:l.recentN] {
		train += r
	}
	if l.recentN > 0 {
		m.Values["train_return_mean"] = train / float64(l.recentN)
	}
	m.RecentReturnMean, m.RecentEpisodes = train/float64(max(l.recentN, 1)), l.recentN
	if c.EvalEvery > 0 && l.open != nil {
		if l.iteration%int64(c.EvalEvery) == 0 {
			ev, err := l.evaluateFresh(ctx)
			if err != nil {
				return m, err
			}
			l.eval = ev
			m.Values["eval_return_mean"] = ev.ReturnMean
		}
		m.RecentReturnMean, m.RecentEpisodes = l.eval.ReturnMean, l.eval.Episodes
	}
	if d := time.Since(start).Seconds(); d > 0 {
		m.StepsPerSecond = float64(c.NumSteps*n) / d
	}
	return m, nil
}

// evaluateFresh is the greedy evaluation of training: EvalEpisodes on
// EvalEnvs new envs, seeded by the run's seed and iteration so a resumed
// run evaluates exactly as the first would have.
func (l *Learner) evaluateFresh(ctx context.Context) (learner.EvalResult, error) {
	seed := l.cfg.Seed ^ 0xE7A1_0000 ^ uint64(l.iteration)*0x9E3779B97F4A7C15
	env, err := l.open(ctx, l.cfg.EvalEnvs, seed)
	if err != nil {
		return learner.EvalResult{}, fmt.Errorf("dqn: evaluation envs: %w", err)
	}
	defer env.Close()
	return l.Evaluate(ctx, env, seed, l.cfg.EvalEpisodes)
}

// Evaluate runs the greedy policy on env for about episodes episodes
// (learner.Evaluate); the learner's own state is untouched.
func (l *Learner) Evaluate(ctx context.Context, env envs.VecEnv, seed uint64, episodes int) (learner.EvalResult, error) {
	spec := env.Spec()
	if spec.Observation.Dim() != l.od || spec.Action.Kind != envs.Discrete || spec.Action.N != l.nAct {
		return learner.EvalResult{}, fmt.Errorf("dqn: evaluate: env %s does not match the learner's %s", spec.Name, l.spec.Name)
	}
	n := env.NumEnvs()
	x, ws := make([]float64, n*l.od), l.q.NewWorkspace(n)
	res, err := learner.Evaluate(ctx, env, seed, episodes, func(obs, acts []float32, n int) { l.greedy(l.params, ws, x, obs, acts, n) })
	if err != nil {
		return res, fmt.Errorf("dqn: %w", err)
	}
	return res, nil
}

// trainStep is one minibatch update with the Huber loss on the TD error;
// it returns the loss, the mean Q of the taken actions and the gradient
// norm before clipping.
func (l *Learner) trainStep() (loss, qMean, norm float64) {
	c, od, na, b := l.cfg, l.od, l.nAct, l.cfg.BatchSize
	size := l.buf.len()
	for k := range l.idx {
		l.idx[k] = l.rng.IntN(size)
	}
	for k, i := range l.idx {
		for d := range od {
			l.xb[k*od+d] = float64(l.buf.obs[i*od+d])
			l.xn[k*od+d] = float64(l.buf.next[i*od+d])
		}
	}
	qt := l.q.Forward(l.target, l.wsT, l.xn, b)
	var qn []float64
	if c.DoubleQ {
		qn = l.q.Forward(l.params, l.wsN, l.xn, b)
	}
	q := l.q.Forward(l.params, l.wsQ, l.xb, b)
	clear(l.dOut)
	for k, i := range l.idx {
		row := qt[k*na : (k+1)*na]
		var v float64
		if c.DoubleQ {
			v = row[argmax(qn[k*na:(k+1)*na])]
		} else {
			v = row[argmax(row)]
		}
		y := float64(l.buf.rew[i])
		if !l.buf.term[i] {
			y += c.Gamma * v
		}
		a := int(l.buf.act[i])
		qa := q[k*na+a]
		d := qa - y
		if math.Abs(d) <= 1 {
			loss += 0.5 * d * d
		} else {
			loss += math.Abs(d) - 0.5
		}
		l.dOut[k*na+a] = max(-1, min(1, d)) / float64(b)
		qMean += qa
	}
	clear(l.grad)
	l.q.Backward(l.params, l.grad, l.wsQ, l.dOut, b)
	norm = nn.ClipGradNorm(l.grad, c.MaxGradNorm)
	l.adam.Update(l.params, l.grad, c.LearningRate)
	if l.gradSteps++; l.gradSteps%int64(c.TargetUpdateInterval) == 0 {
		copy(l.target, l.params)
	}
	return loss / float64(b), qMean / float64(b), norm
}
