package ppo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Distributed PPO: rollout workers act, a trainer learns.
//
// A worker is a Learner made with NewActor on its own envs; Collect takes
// one Weights (published by the trainer) and returns one Fragment. The
// trainer is a Learner made with NewTrainer (no envs: the spec and the
// total env count across workers); Learn runs GAE and the PPO epochs on
// the fragments of one iteration, exactly as Iterate does on a rollout it
// collected itself, and Weights gives the next version to publish. The
// in-process path (New, Iterate) is unchanged by any of this.

// fragTrack is what an actor records beside the rollout.
type fragTrack struct {
	obs, ret    runningMeanStd // this fragment's samples only
	term, trunc []bool
	epRet       []float64
	epLen       []int64
}

// Weights are one policy version: what a rollout worker needs to act.
type Weights struct {
	Version    int64        `json:"version"`    // learner iterations completed
	Generation string       `json:"generation"` // the trainer session that published them
	Timesteps  int64        `json:"timesteps"`
	ObsRMS     RunningStats `json:"obs_rms"`
	RetRMS     RunningStats `json:"ret_rms"`
	Params     []float64    `json:"-"`
}

const weightsMagic = "TYWGHTv1"

// ErrWeights marks bytes that are not well-formed weights.
var ErrWeights = errors.New("bad weights")

// Encode serialises w: magic, uint32 header length, JSON header, the
// parameters as float64, sha256.
func (w *Weights) Encode() ([]byte, error) {
	hdr, err := json.Marshal(struct {
		*Weights
		NumParams int `json:"num_params"`
	}{w, len(w.Params)})
	if err != nil {
		return nil, fmt.Errorf("ppo: weights header: %w", err)
	}
	var b bytes.Buffer
	b.WriteString(weightsMagic)
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(hdr))))
	b.Write(hdr)
	var f [8]byte
	for _, v := range w.Params {
		binary.LittleEndian.PutUint64(f[:], math.Float64bits(v))
		b.Write(f[:])
	}
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes(), nil
}

// DecodeWeights parses bytes written by Weights.Encode.
func DecodeWeights(data []byte) (*Weights, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("ppo: %w: %s", ErrWeights, fmt.Sprintf(format, a...))
	}
	hdr, body, reason := openSealed(data, weightsMagic, "a weights object")
	if reason != "" {
		return nil, bad("%s", reason)
	}
	var h struct {
		Weights
		NumParams int `json:"num_params"`
	}
	if err := json.Unmarshal(hdr, &h); err != nil {
		return nil, bad("header: %v", err)
	}
	p := 0
	if h.NumParams < 0 || int64(len(body)-p) != 8*int64(h.NumParams) {
		return nil, bad("%d parameters but %d bytes", h.NumParams, len(body)-p)
	}
	w := h.Weights
	w.Params = make([]float64, h.NumParams)
	for i := range w.Params {
		w.Params[i] = math.Float64frombits(binary.LittleEndian.Uint64(body[p:]))
		p += 8
	}
	return &w, nil
}

// specOnly is a VecEnv with a spec and a size but no envs: the trainer's.
type specOnly struct {
	spec envs.Spec
	n    int
}

// SpecOnly returns an env that has spec and n instances but cannot step:
// what NewTrainer builds on and what Restore needs to bring a trainer's
// checkpoint back.
func SpecOnly(spec envs.Spec, n int) envs.VecEnv { return specOnly{spec, n} }

func (s specOnly) Spec() envs.Spec               { return s.spec }
func (s specOnly) NumEnvs() int                  { return s.n }
func (s specOnly) Reset(uint64, []float32) error { return nil }
func (s specOnly) Close() error                  { return nil }
func (s specOnly) Step(_, _, _ []float32, _, _ []bool, _ []float32) error {
	return errors.New("ppo: a trainer's env cannot step (its rollouts come from workers)")
}

// NewTrainer builds a learner that learns from fragments: numEnvs is the
// env count of all its workers together (workers × envs per worker).
// Its weights start exactly as New's for the same config.
func NewTrainer(spec envs.Spec, numEnvs int, cfg Config) (*Learner, error) {
	return New(SpecOnly(spec, numEnvs), cfg)
}

// NewActor builds a rollout worker's learner on env: it never updates,
// it acts with the weights given to Collect. cfg must be the trainer's
// (the networks' shapes); cfg.Seed seeds this worker's sampling and env
// resets, so give each worker its own.
func NewActor(env envs.VecEnv, cfg Config) (*Learner, error) {
	l, err := New(env, cfg)
	if err != nil {
		return nil, err
	}
	l.startTracking()
	return l, nil
}

// startTracking makes l an actor: it records what a fragment carries.
func (l *Learner) startTracking() {
	tn := l.cfg.NumSteps * l.nEnv
	l.track = &fragTrack{term: make([]bool, tn), trunc: make([]bool, tn)}
}

func (r RunningStats) rms() runningMeanStd {
	return runningMeanStd{Mean: append([]float64(nil), r.Mean...), Var: append([]float64(nil), r.Var...), Count: r.Count}
}

func statsOf(r runningMeanStd) RunningStats {
	return RunningStats{Mean: append([]float64(nil), r.Mean...), Var: append([]float64(nil), r.Var...), Count: r.Count}
}

// Weights returns the learner's current policy version.
func (l *Learner) Weights(generation string) *Weights {
	return &Weights{Version: l.iteration, Generation: generation, Timesteps: l.timesteps,
		ObsRMS: statsOf(l.obsRMS), RetRMS: statsOf(l.retRMS), Params: l.Params()}
}

// Collect acts one iteration (NumSteps steps of every env) with w and
// returns the fragment for iteration w.Version+1. Only for NewActor's
// learners. The envs, unfinished episodes and per-env discounted returns
// carry over from one Collect to the next.
func (l *Learner) Collect(ctx context.Context, w *Weights, worker int, node string) (*Fragment, error) {
	if err := l.beginCollect(w); err != nil {
		return nil, err
	}
	start := time.Now()
	var m Metrics
	if err := l.collect(ctx, &m); err != nil {
		return nil, err
	}
	return l.fragment(w, worker, node, time.Since(start).Seconds()), nil
}

// beginCollect takes w's parameters and statistics and starts a fresh
// fragment's record.
func (l *Learner) beginCollect(w *Weights) error {
	if l.track == nil {
		return errors.New("ppo: Collect needs a learner made with NewActor")
	}
	if len(w.Params) != len(l.params) || len(w.ObsRMS.Mean) != l.od || len(w.ObsRMS.Var) != l.od ||
		len(w.RetRMS.Mean) != 1 || len(w.RetRMS.Var) != 1 {
		return fmt.Errorf("ppo: weights version %d: %d parameters and %d-dim statistics, this %s actor has %d and %d",
			w.Version, len(w.Params), len(w.ObsRMS.Mean), l.spec.Name, len(l.params), l.od)
	}
	copy(l.params, w.Params)
	l.obsRMS, l.retRMS = w.ObsRMS.rms(), w.RetRMS.rms()
	tr := l.track
	tr.obs, tr.ret = runningMeanStd{Mean: make([]float64, l.od), Var: make([]float64, l.od)}, runningMeanStd{Mean: make([]float64, 1), Var: make([]float64, 1)}
	tr.epRet, tr.epLen = []float64{}, []int64{}
	return nil
}

// fragment is the rollout just collected with w, which took secs.
func (l *Learner) fragment(w *Weights, worker int, node string, secs float64) *Fragment {
	tr := l.track
	next := l.nextValues()
	f := &Fragment{
		Iteration: w.Version + 1, WeightVersion: w.Version, Generation: w.Generation, Worker: worker, Node: node,
		NumEnvs: l.nEnv, NumSteps: l.cfg.NumSteps, ObsDim: l.od, ActDim: l.ad, RolloutSeconds: secs,
		EpisodeReturns: tr.epRet, EpisodeLengths: tr.epLen,
		Obs: append([]float64(nil), l.buf.obs...), Actions: append([]float64(nil), l.buf.actions...),
		LogProbs: append([]float64(nil), l.buf.logp...), Values: append([]float64(nil), l.buf.values...),
		Rewards:    append([]float64(nil), l.buf.rewards...),
		Terminated: append([]bool(nil), tr.term...), Truncated: append([]bool(nil), tr.trunc...),
		NextValues: append([]float64(nil), next...),
	}
	if l.cfg.NormalizeObs {
		f.ObsStats = statsOf(tr.obs)
	}
	if l.cfg.NormalizeReward {
		f.RetStats = statsOf(tr.ret)
	}
	if l.masked {
		f.MaskDim, f.Mask = l.nAct, append([]bool(nil), l.buf.mask...)
	}
	return f
}

// Learn runs one PPO iteration on the fragments of one iteration, given in
// worker order (their envs are laid side by side in that order, so a
// trainer's run is reproducible given its fragments). Their env counts
// must add up to the trainer's; each must be NumSteps long.
func (l *Learner) Learn(ctx context.Context, frags []*Fragment) (Metrics, error) {
	start := time.Now()
	n, od, ad, T := l.nEnv, l.od, l.ad, l.cfg.NumSteps
	maskDim := 0
	if l.masked {
		maskDim = l.nAct
	}
	total := 0
	for _, f := range frags {
		if err := f.check(); err != nil {
			return Metrics{}, err
		}
		if f.NumSteps != T || f.ObsDim != od || f.ActDim != ad || f.MaskDim != maskDim {
			return Metrics{}, fmt.Errorf("ppo: %w: worker %d: %d steps, obs %d, act %d, mask %d; the trainer wants %d, %d, %d, %d",
				ErrFragment, f.Worker, f.NumSteps, f.ObsDim, f.ActDim, f.MaskDim, T, od, ad, maskDim)
		}
		total += f.NumEnvs
	}
	if total != n {
		return Metrics{}, fmt.Errorf("ppo: %w: %d fragments hold %d envs, the trainer learns from %d", ErrFragment, len(frags), total, n)
	}
	m := Metrics{LearningRate: l.cfg.LearningRate * l.progress()}
	m.EpisodeReturnMin, m.EpisodeReturnMax = math.Inf(1), math.Inf(-1)
	var lenSum int64
	next := make([]float64, n)
	b := &l.buf
	off := 0
	var rolloutSecs float64
	for _, f := range frags {
		e := f.NumEnvs
		for t := 0; t < T; t++ {
			for i := 0; i < e; i++ {
				src, dst := t*e+i, t*n+off+i
				copy(b.obs[dst*od:(dst+1)*od], f.Obs[src*od:(src+1)*od])
				copy(b.actions[dst*ad:(dst+1)*ad], f.Actions[src*ad:(src+1)*ad])
				b.logp[dst], b.values[dst], b.rewards[dst] = f.LogProbs[src], f.Values[src], f.Rewards[src]
				b.dones[dst] = 0
				if f.Terminated[src] || f.Truncated[src] {
					b.dones[dst] = 1
				}
				if maskDim > 0 {
					copy(b.mask[dst*maskDim:(dst+1)*maskDim], f.Mask[src*maskDim:(src+1)*maskDim])
				}
			}
		}
		copy(next[off:off+e], f.NextValues)
		off += e
		if l.cfg.NormalizeObs && f.ObsStats.Count > 0 {
			l.obsRMS.merge(f.ObsStats.Mean, f.ObsStats.Var, f.ObsStats.Count)
		}
		if l.cfg.NormalizeReward && f.RetStats.Count > 0 {
			l.retRMS.merge(f.RetStats.Mean, f.RetStats.Var, f.RetStats.Count)
		}
		lenSum += l.takeEpisodes(f, &m)
		rolloutSecs = max(rolloutSecs, f.RolloutSeconds)
		m.Rollouts = append(m.Rollouts, f.Info())
	}
	l.endRollout(&m, lenSum)
	l.gae(next)
	if err := l.update(ctx, &m); err != nil {
		return m, err
	}
	l.iteration++
	l.timesteps += int64(T * n)
	steps := float64(T * n)
	m.Iteration, m.Timesteps = l.iteration, l.timesteps
	// Wall time from the previous Learn (waiting for workers included).
	since := start
	if !l.lastLearn.IsZero() {
		since = l.lastLearn
	}
	l.lastLearn = time.Now()
	m.StepsPerSecond = steps / max(l.lastLearn.Sub(since).Seconds(), 1e-9)
	if rolloutSecs > 0 {
		m.RolloutStepsPerSecond = steps / rolloutSecs
	}
	l.finishRecent(&m)
	return m, nil
}

// takeEpisodes counts the episodes that ended in f into m and the recent
// window; it returns their summed lengths.
func (l *Learner) takeEpisodes(f *Fragment, m *Metrics) (lenSum int64) {
	for j, r := range f.EpisodeReturns {
		m.countEpisode(r)
		lenSum += f.EpisodeLengths[j]
		l.recent.add(r)
	}
	return lenSum
}
