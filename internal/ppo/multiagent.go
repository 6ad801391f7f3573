package ppo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"time"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/scripted"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Multi-agent PPO: each learned policy is a Learner over the slots of the
// agents mapped to it, stepped in lock-step by one driver that owns the env
// (envs.Spec.MultiAgent) and hands every policy its agents' observations,
// rewards and done flags; a policy mapped to several agents shares its
// parameters among them (MAPPO's baseline), a script only acts. Each
// trained policy runs its own PPO epochs on its own agents' experience.
// A policy that is neither trained nor a script acts with its initial
// weights (RLlib's frozen policy).
//
// An agent that finishes before its instance's others sits out (its slot
// reports nothing until the instance resets); its policy is handed those
// steps as zero-reward steps, which built-in games never have.

// multi is multi-agent PPO as a learner.Learner.
type multi struct {
	env  envs.VecEnv
	spec envs.Spec
	res  learner.Resolved
	seed uint64

	na, slots, od, ad int
	pols              []*maPolicy
	obs, finalObs     []float32
	rewards, actions  []float32
	term, trunc       []bool

	iteration, timesteps int64
	// joint counts the two agents' joint discrete actions of an
	// iteration (two-agent envs with discrete actions): mutual
	// cooperation and defection in the prisoner's dilemma.
	joint []int64
	seats []*seat // league agents (multiagent_league.go)
}

// maPolicy is one policy of a multi-agent run.
type maPolicy struct {
	name  string
	train bool
	// league: it plays only in a league's seats (its Learner, if any,
	// only acts: its view is one slot it never steps).
	league bool
	l      *Learner      // nil for a script
	act    learner.Act   // a script's
	slots  []int         // the env slots it acts for, in its own env order
	obs    []float32     // a script's observations
	acts   []float32     // a script's actions
	count  []int64       // discrete actions taken this iteration, by index
	m      Metrics       // this iteration's
	stats  scriptReturns // a script's episode returns
}

// scriptReturns keeps a script's episode bookkeeping (a Learner keeps its
// own).
type scriptReturns struct {
	epRet  []float64
	recent returnWindow
	// ended are this rollout's episode returns (a rollout worker sends
	// them to the trainer).
	ended []float64
}

// slotView is what a policy's Learner is sized by: its slots of the env.
// It is never stepped (the driver steps the env); as a Snapshotter it
// tells Save and Restore to keep the learner's per-env state, which the
// driver's own checkpoint pairs with the env's.
type slotView struct {
	spec envs.Spec
	n    int
}

func (v slotView) Spec() envs.Spec                                        { return v.spec }
func (v slotView) NumEnvs() int                                           { return v.n }
func (v slotView) Reset(uint64, []float32) error                          { return nil }
func (v slotView) Close() error                                           { return nil }
func (v slotView) Snapshot() ([]byte, error)                              { return []byte{1}, nil }
func (v slotView) RestoreSnapshot([]byte) error                           { return nil }
func (v slotView) Step(_, _, _ []float32, _, _ []bool, _ []float32) error { return errViewStep }

var errViewStep = errors.New("ppo: a policy's slot view is stepped by the multi-agent driver")

// newMulti builds the driver and its policies without initialising weights
// (cfgs[i]: policy i's config; nil for a script).
func newMulti(env envs.VecEnv, res learner.Resolved, cfgs []*Config, seed uint64, build func(*maPolicy, envs.VecEnv, Config) error) (*multi, error) {
	spec := env.Spec()
	m := &multi{env: env, spec: spec, res: res, seed: seed, na: len(spec.Agents), slots: env.NumEnvs(),
		od: spec.Observation.Dim(), ad: spec.Action.Dim()}
	if m.na == 0 || m.slots%m.na != 0 {
		return nil, fmt.Errorf("ppo: %s: %d slots for %d agents", spec.Name, m.slots, m.na)
	}
	view := spec
	view.Agents = nil
	for i, name := range res.Names {
		p := &maPolicy{name: name, train: res.Train[i], league: i < len(res.Member) && res.Member[i]}
		for k := 0; k < m.slots; k++ {
			if res.Agent[k%m.na] == i {
				p.slots = append(p.slots, k)
			}
		}
		if s := res.Policy[i].Script; s != "" {
			sc, err := scripted.For(s, spec.Name)
			if err != nil {
				return nil, &learner.FieldError{Field: "policies." + name + ".script", Reason: err.Error()}
			}
			p.act = sc.Act
			p.obs, p.acts = make([]float32, len(p.slots)*m.od), make([]float32, len(p.slots)*m.ad)
			p.stats = scriptReturns{epRet: make([]float64, len(p.slots)), recent: newReturnWindow(100)}
		} else {
			var c Config
			if cfgs[i] != nil {
				c = *cfgs[i]
			}
			if err := build(p, slotView{spec: view, n: max(1, len(p.slots))}, c); err != nil {
				return nil, fmt.Errorf("ppo: policy %s: %w", name, err)
			}
			p.l.frozen = !p.train
			if p.league {
				p.stats = scriptReturns{recent: newReturnWindow(100)}
			}
		}
		if spec.Action.Kind == envs.Discrete {
			p.count = make([]int64, spec.Action.N)
		}
		m.pols = append(m.pols, p)
	}
	n := m.slots
	m.obs, m.finalObs = make([]float32, n*m.od), make([]float32, n*m.od)
	m.rewards, m.actions = make([]float32, n), make([]float32, n*m.ad)
	m.term, m.trunc = make([]bool, n), make([]bool, n)
	m.seats = newSeats(res, m.na, n, m.od, m.ad, seed)
	if m.na == 2 && spec.Action.Kind == envs.Discrete {
		m.joint = make([]int64, spec.Action.N*spec.Action.N)
	}
	return m, nil
}

// multiConfigs is every learned policy's config: the run's (base) with the
// policy's own hyper-parameters over it. Every policy keeps the run's
// num_steps: the driver steps them together.
func multiConfigs(res learner.Resolved, base func(hp map[string]any) (Config, error), runHP map[string]any) ([]*Config, error) {
	cfgs := make([]*Config, len(res.Names))
	var steps int
	for i, p := range res.Policy {
		if p.Script != "" {
			continue
		}
		hp := maps.Clone(runHP)
		if hp == nil {
			hp = map[string]any{}
		}
		maps.Copy(hp, p.Hyperparameters)
		c, err := base(hp)
		if err != nil {
			var fe *learner.FieldError
			if errors.As(err, &fe) && len(p.Hyperparameters) > 0 {
				return nil, &learner.FieldError{Field: "policies." + res.Names[i] + "." + fe.Field, Reason: fe.Reason}
			}
			return nil, err
		}
		if _, ok := p.Hyperparameters["num_steps"]; ok && steps != 0 && c.NumSteps != steps {
			return nil, &learner.FieldError{Field: "policies." + res.Names[i] + ".hyperparameters.num_steps", Reason: "every policy steps the run's num_steps"}
		}
		if steps == 0 {
			steps = c.NumSteps
		}
		// Distinct streams per policy: two policies on one seed would start
		// as one.
		c.Seed = base0Seed(c.Seed, i)
		cfgs[i] = &c
	}
	for i, c := range cfgs {
		if c != nil && c.NumSteps != steps {
			return nil, &learner.FieldError{Field: "policies." + res.Names[i] + ".hyperparameters.num_steps", Reason: "every policy steps the run's num_steps"}
		}
	}
	return cfgs, nil
}

func base0Seed(seed uint64, i int) uint64 { return seed + uint64(i)*0x9E3779B97F4A7C15 }

// start resets the env with seed and hands each policy its observations.
func (m *multi) start(seed uint64) error {
	if err := m.env.Reset(seed, m.obs); err != nil {
		return fmt.Errorf("ppo: reset %s: %w", m.spec.Name, err)
	}
	m.scatterObs()
	return nil
}

// scatterObs copies the env's observations into each policy's own.
func (m *multi) scatterObs() {
	od := m.od
	for _, p := range m.pols {
		dst := p.obs
		if p.l != nil {
			dst = p.l.obs
		}
		for j, k := range p.slots {
			copy(dst[j*od:(j+1)*od], m.obs[k*od:(k+1)*od])
		}
	}
}

func (m *multi) Counters() (int64, int64) { return m.iteration, m.timesteps }

// Iterate collects one rollout of every policy together, then trains each
// trained policy on its own.
func (m *multi) Iterate(ctx context.Context) (learner.Metrics, error) {
	start := time.Now()
	lens, err := m.rollout(ctx)
	if err != nil {
		return learner.Metrics{}, err
	}
	rollout := time.Since(start)
	for i, p := range m.pols {
		switch {
		case p.bookkept():
			p.stats.finish(&p.m)
		case p.train:
			p.l.endRollout(&p.m, lens[i])
			if err := p.l.learn(ctx, &p.m, start, rollout); err != nil {
				return learner.Metrics{}, fmt.Errorf("ppo: policy %s: %w", p.name, err)
			}
		default:
			p.l.endRollout(&p.m, lens[i])
			p.l.finishRecent(&p.m)
		}
	}
	m.iteration++
	return m.metrics(time.Since(start), m.numSteps()), nil
}

// rollout steps every policy together for num_steps steps: each learned
// policy's rollout in its Learner, each policy's episodes and actions in
// its metrics; it returns each policy's summed episode lengths.
func (m *multi) rollout(ctx context.Context) ([]int64, error) {
	T := m.numSteps()
	lens := make([]int64, len(m.pols))
	clear(m.joint)
	for _, p := range m.pols {
		p.m = Metrics{EpisodeReturnMin: math.Inf(1), EpisodeReturnMax: math.Inf(-1)}
		if p.l != nil {
			p.m.LearningRate = p.l.cfg.LearningRate * p.l.progress()
		}
		clear(p.count)
		p.stats.ended = p.stats.ended[:0]
	}
	od, ad := m.od, m.ad
	for t := 0; t < T; t++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("ppo: rollout: %w", err)
		}
		for _, p := range m.pols {
			if p.league {
				continue
			}
			src := p.acts
			if p.l != nil {
				p.l.actStep(t)
				src = p.l.actions
			} else {
				p.act(p.obs, p.acts, len(p.slots))
			}
			for j, k := range p.slots {
				copy(m.actions[k*ad:(k+1)*ad], src[j*ad:(j+1)*ad])
				if p.count != nil {
					p.count[int(src[j])]++
				}
			}
		}
		m.actSeats(m.obs, m.actions, m.seats, nil)
		if m.joint != nil {
			for i := 0; i < m.slots; i += 2 {
				m.joint[int(m.actions[i])*m.spec.Action.N+int(m.actions[i+1])]++
			}
		}
		if err := m.env.Step(m.actions, m.obs, m.rewards, m.term, m.trunc, m.finalObs); err != nil {
			return nil, fmt.Errorf("ppo: step %s: %w", m.spec.Name, err)
		}
		m.timesteps += int64(m.slots / m.na)
		m.scatterObs()
		m.recordSeats()
		for i, p := range m.pols {
			if p.league {
				continue
			}
			if p.l == nil {
				p.recordScript(m)
				continue
			}
			l := p.l
			for j, k := range p.slots {
				l.rewards[j], l.term[j], l.trunc[j] = m.rewards[k], m.term[k], m.trunc[k]
				if m.term[k] || m.trunc[k] {
					copy(l.finalObs[j*od:(j+1)*od], m.finalObs[k*od:(k+1)*od])
				}
			}
			l.recordStep(t, &p.m, &lens[i])
		}
	}
	return lens, nil
}

func (m *multi) numSteps() int {
	for _, p := range m.pols {
		if p.l != nil {
			return p.l.cfg.NumSteps
		}
	}
	return 0 // Resolve lets no run train without a learned policy
}

// recordScript keeps a script's episode returns.
func (p *maPolicy) recordScript(m *multi) {
	s := &p.stats
	for j, k := range p.slots {
		s.epRet[j] += float64(m.rewards[k])
		if m.term[k] || m.trunc[k] {
			s.ended = append(s.ended, s.epRet[j])
			s.take(s.epRet[j], &p.m)
			s.epRet[j] = 0
		}
	}
}

// take counts one ended episode's return r into m and the recent window.
func (s *scriptReturns) take(r float64, m *Metrics) {
	m.countEpisode(r)
	s.recent.add(r)
}

func (s *scriptReturns) finish(m *Metrics) {
	if m.Episodes > 0 {
		m.EpisodeReturnMean /= float64(m.Episodes)
	} else {
		m.EpisodeReturnMin, m.EpisodeReturnMax = 0, 0
	}
	s.recent.fill(m)
}

// metrics is the iteration's numbers: the run's (over the trained
// policies' agents) and each policy's under policy/<name>/.
func (m *multi) metrics(took time.Duration, T int) learner.Metrics {
	out := learner.Metrics{Iteration: m.iteration, Timesteps: m.timesteps, Values: map[string]float64{}}
	out.StepsPerSecond = float64(T*m.slots/m.na) / took.Seconds()
	out.EpisodeReturnMin, out.EpisodeReturnMax = math.Inf(1), math.Inf(-1)
	var lenSum float64
	for _, p := range m.pols {
		pm := p.m
		v := out.Values
		pre := "policy/" + p.name + "/"
		v[pre+"episode_return_mean"] = pm.EpisodeReturnMean
		v[pre+"recent_return_mean"] = pm.RecentReturnMean
		v[pre+"episodes"] = float64(pm.Episodes)
		if p.l != nil && p.train {
			for k, x := range pm.Generic().Values {
				v[pre+k] = x
			}
		}
		var total int64
		for _, c := range p.count {
			total += c
		}
		for a, c := range p.count {
			v[pre+"action_"+strconv.Itoa(a)+"_rate"] = float64(c) / float64(max(total, 1))
		}
		if !p.train {
			continue
		}
		if pm.Episodes > 0 {
			out.EpisodeReturnMean += pm.EpisodeReturnMean * float64(pm.Episodes)
			lenSum += pm.EpisodeLengthMean * float64(pm.Episodes)
			out.EpisodeReturnMin = min(out.EpisodeReturnMin, pm.EpisodeReturnMin)
			out.EpisodeReturnMax = max(out.EpisodeReturnMax, pm.EpisodeReturnMax)
			out.Episodes += pm.Episodes
		}
		out.RecentReturnMean += pm.RecentReturnMean * float64(pm.RecentEpisodes)
		out.RecentEpisodes += pm.RecentEpisodes
	}
	if out.Episodes > 0 {
		out.EpisodeReturnMean /= float64(out.Episodes)
		out.EpisodeLengthMean = lenSum / float64(out.Episodes)
	} else {
		out.EpisodeReturnMin, out.EpisodeReturnMax = 0, 0
	}
	if out.RecentEpisodes > 0 {
		out.RecentReturnMean /= float64(out.RecentEpisodes)
	}
	if m.joint != nil {
		var total int64
		for _, c := range m.joint {
			total += c
		}
		n := m.spec.Action.N
		for i, c := range m.joint {
			out.Values["joint_action/"+strconv.Itoa(i/n)+"_"+strconv.Itoa(i%n)+"_rate"] = float64(c) / float64(max(total, 1))
		}
	}
	return out
}

// Evaluate plays every policy's deterministic action (a script's own) on
// env, reset with seed, for about episodes agent-episodes: the result is
// over every agent's returns.
func (m *multi) Evaluate(ctx context.Context, env envs.VecEnv, seed uint64, episodes int) (learner.EvalResult, error) {
	spec := env.Spec()
	if len(spec.Agents) != m.na || spec.Observation.Dim() != m.od || spec.Action.Dim() != m.ad {
		return learner.EvalResult{}, fmt.Errorf("ppo: evaluate: env %s does not match the learner's %s", spec.Name, m.spec.Name)
	}
	od, ad, n := m.od, m.ad, env.NumEnvs()
	// Each policy's slots of env and its buffers, made once; a league
	// agent plays its members in turn, instance by instance.
	type group struct {
		slots []int
		o, a  []float32
	}
	groups := make([]group, len(m.pols))
	for k := 0; k < n; k++ {
		if i := m.res.Agent[k%m.na]; i >= 0 {
			groups[i].slots = append(groups[i].slots, k)
		}
	}
	for i := range groups {
		groups[i].o, groups[i].a = make([]float32, len(groups[i].slots)*od), make([]float32, len(groups[i].slots)*ad)
	}
	seats := newSeats(m.res, m.na, n, od, ad, seed)
	turn := func(s *seat, j int) int { ms := m.res.League[s.agent]; return ms[j%len(ms)] }
	act := func(obs, acts []float32, _ int) {
		m.actSeats(obs, acts, seats, turn)
		for i, p := range m.pols {
			g := groups[i]
			if len(g.slots) == 0 {
				continue
			}
			for j, k := range g.slots {
				copy(g.o[j*od:(j+1)*od], obs[k*od:(k+1)*od])
			}
			if p.l != nil {
				_ = p.l.Act(g.o, g.a) // sizes match by construction
			} else {
				p.act(g.o, g.a, len(g.slots))
			}
			for j, k := range g.slots {
				copy(acts[k*ad:(k+1)*ad], g.a[j*ad:(j+1)*ad])
			}
		}
	}
	res, err := learner.Evaluate(ctx, env, seed, episodes, act)
	if err != nil {
		return res, fmt.Errorf("ppo: %w", err)
	}
	return res, nil
}
