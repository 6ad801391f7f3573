package ppo

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Distributed multi-agent PPO: a rollout worker is a multi driver on its
// own env whose learned policies are actors; the trainer is a multi driver
// on no env whose learned policies are trainers, each sized by its slots
// across every worker. One weights object holds every learned policy's
// Weights, one fragment every policy's share of a worker's iteration: a
// learned policy's Fragment (a frozen one's only for its episodes), a
// script's episode returns, and the action counts the metrics report.
// Each trained policy's Learn sees its fragments in worker order, as a
// single-agent trainer does.

const (
	multiWeightsMagic = "TYMAWGHT"
	multiFragMagic    = "TYMAFRAG"
	multiBusVersion   = 1
)

// multiWeightsHeader heads a multi-agent weights object.
type multiWeightsHeader struct {
	Version  int64    `json:"version"`
	Policies []string `json:"policies"` // the learned ones, in name order
}

// multiFragHeader heads a multi-agent fragment.
type multiFragHeader struct {
	WeightVersion  int64            `json:"weight_version"`
	Worker         int              `json:"worker"`
	Node           string           `json:"node,omitempty"`
	Slots          int              `json:"slots"`
	RolloutSeconds float64          `json:"rollout_seconds"`
	Policies       []multiFragShare `json:"policies"` // every policy, in name order
	Joint          []int64          `json:"joint,omitempty"`
}

// multiFragShare is one policy's share of a multi-agent fragment.
type multiFragShare struct {
	Name string `json:"name"`
	// Learned: its PPO Fragment follows in the payload (a network that
	// steps its own slots); a script's or a league member's share is only
	// Returns and Counts.
	Learned bool      `json:"learned"`
	Returns []float64 `json:"returns,omitempty"`
	Counts  []int64   `json:"action_counts,omitempty"`
}

// multiTrainer is multi-agent PPO as a learner.Trainer.
type multiTrainer struct {
	*multi
	lastLearn time.Time
}

// multiActor is a multi-agent rollout worker (learner.Actor).
type multiActor struct{ *multi }

// newMultiTrainer is a fresh trainer for numEnvs slots of spec.
func (f Factory) newMultiTrainer(spec envs.Spec, numEnvs int, k learner.Knobs) (*multiTrainer, error) {
	res, cfgs, err := f.multiAgent(spec, k)
	if err != nil {
		return nil, err
	}
	m, err := newMultiLearner(SpecOnly(spec, numEnvs), res, cfgs, k.Seed, k.Imports)
	if err != nil {
		return nil, err
	}
	return &multiTrainer{multi: m}, nil
}

func restoreMultiTrainer(data []byte, spec envs.Spec, numEnvs int) (*multiTrainer, error) {
	m, err := restoreMulti(data, SpecOnly(spec, numEnvs))
	if err != nil {
		return nil, err
	}
	return &multiTrainer{multi: m}, nil
}

// newMultiActor is a rollout worker on env: the trainer's policies (an
// imported one from its checkpoint, for its network's shape), acting with
// the weights each Collect is given.
func (f Factory) newMultiActor(env envs.VecEnv, k learner.Knobs) (*multiActor, error) {
	res, cfgs, err := f.multiAgent(env.Spec(), k)
	if err != nil {
		return nil, err
	}
	m, err := newMultiLearner(env, res, cfgs, k.Seed, k.Imports)
	if err != nil {
		return nil, err
	}
	for _, p := range m.pols {
		if p.l != nil {
			p.l.startTracking()
		}
	}
	return &multiActor{m}, nil
}

// Weights holds every learned policy's current weights.
func (t *multiTrainer) Weights() ([]byte, error) {
	h := multiWeightsHeader{Version: t.iteration}
	var payload []byte
	for _, p := range t.pols {
		if p.l == nil {
			continue
		}
		w := p.l.Weights("")
		w.Version = t.iteration
		b, err := w.Encode()
		if err != nil {
			return nil, fmt.Errorf("ppo: policy %s: %w", p.name, err)
		}
		h.Policies = append(h.Policies, p.name)
		payload = binary.LittleEndian.AppendUint64(payload, uint64(len(b)))
		payload = append(payload, b...)
	}
	hdr, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("ppo: weights header: %w", err)
	}
	return learner.Seal(multiWeightsMagic, multiBusVersion, hdr, payload), nil
}

// Collect acts one iteration with every policy's weights.
func (a *multiActor) Collect(ctx context.Context, raw []byte, worker int, node string) ([]byte, int64, error) {
	hdr, body, err := learner.Unseal(raw, multiWeightsMagic, multiBusVersion, "multi-agent PPO weights")
	if err != nil {
		return nil, 0, fmt.Errorf("ppo: %w: %w", ErrWeights, err)
	}
	var h multiWeightsHeader
	if err := json.Unmarshal(hdr, &h); err != nil {
		return nil, 0, fmt.Errorf("ppo: %w: header: %v", ErrWeights, err)
	}
	all := make([]bool, len(h.Policies))
	for i := range all {
		all[i] = true
	}
	parts, err := splitLearned(body, h.Policies, all, ErrWeights)
	if err != nil {
		return nil, 0, fmt.Errorf("ppo: %w", err)
	}
	ws := map[string]*Weights{}
	for i, n := range h.Policies {
		if ws[n], err = DecodeWeights(parts[i]); err != nil {
			return nil, 0, fmt.Errorf("ppo: policy %s: %w", n, err)
		}
	}
	for _, p := range a.pols {
		if p.l == nil {
			continue
		}
		w, ok := ws[p.name]
		if !ok {
			return nil, 0, fmt.Errorf("ppo: %w: version %d has no policy %s", ErrWeights, h.Version, p.name)
		}
		if err := p.l.beginCollect(w); err != nil {
			return nil, 0, fmt.Errorf("ppo: policy %s: %w", p.name, err)
		}
	}
	start := time.Now()
	if _, err := a.rollout(ctx); err != nil {
		return nil, 0, err
	}
	secs := time.Since(start).Seconds()
	fh := multiFragHeader{WeightVersion: h.Version, Worker: worker, Node: node, Slots: a.slots, RolloutSeconds: secs, Joint: a.joint}
	var payload []byte
	for _, p := range a.pols {
		share := multiFragShare{Name: p.name, Learned: !p.bookkept(), Counts: p.count}
		if p.bookkept() {
			share.Returns = p.stats.ended
		} else {
			b, err := p.l.fragment(ws[p.name], worker, node, secs).Encode()
			if err != nil {
				return nil, 0, fmt.Errorf("ppo: policy %s: %w", p.name, err)
			}
			payload = binary.LittleEndian.AppendUint64(payload, uint64(len(b)))
			payload = append(payload, b...)
		}
		fh.Policies = append(fh.Policies, share)
	}
	hb, err := json.Marshal(fh)
	if err != nil {
		return nil, 0, fmt.Errorf("ppo: fragment header: %w", err)
	}
	steps := int64(a.numSteps() * a.slots / a.na)
	return learner.Seal(multiFragMagic, multiBusVersion, hb, payload), steps, nil
}

// Learn trains one iteration on every worker's multi-agent fragment: each
// trained policy on its agents' experience from every worker, the others
// only counting their episodes.
func (t *multiTrainer) Learn(ctx context.Context, raw [][]byte) (learner.Metrics, error) {
	start := time.Now()
	frags := make([]multiFragHeader, len(raw))
	shares := make([][][]byte, len(raw)) // [worker][policy] its Fragment
	slots := 0
	for w, b := range raw {
		h, parts, err := t.decodeFragment(b)
		if err != nil {
			return learner.Metrics{}, fmt.Errorf("ppo: fragment %d: %w", w, err)
		}
		frags[w], shares[w] = h, parts
		slots += h.Slots
	}
	if slots != t.slots {
		return learner.Metrics{}, fmt.Errorf("ppo: %w: %d fragments hold %d slots, the trainer learns from %d", ErrFragment, len(raw), slots, t.slots)
	}
	clear(t.joint)
	for _, h := range frags {
		for i, c := range h.Joint {
			t.joint[i] += c
		}
	}
	for i, p := range t.pols {
		p.m = Metrics{EpisodeReturnMin: math.Inf(1), EpisodeReturnMax: math.Inf(-1)}
		clear(p.count)
		for _, h := range frags {
			for a, c := range h.Policies[i].Counts {
				p.count[a] += c
			}
		}
		if p.bookkept() {
			for _, h := range frags {
				for _, r := range h.Policies[i].Returns {
					p.stats.take(r, &p.m)
				}
			}
			p.stats.finish(&p.m)
			continue
		}
		fs := make([]*Fragment, len(raw))
		for w := range raw {
			f, err := DecodeFragment(shares[w][i])
			if err != nil {
				return learner.Metrics{}, fmt.Errorf("ppo: worker %d policy %s: %w", w, p.name, err)
			}
			fs[w] = f
		}
		if p.train {
			pm, err := p.l.Learn(ctx, fs)
			if err != nil {
				return learner.Metrics{}, fmt.Errorf("ppo: policy %s: %w", p.name, err)
			}
			p.m = pm
			continue
		}
		var lenSum int64
		for _, f := range fs {
			lenSum += p.l.takeEpisodes(f, &p.m)
		}
		p.l.endRollout(&p.m, lenSum)
		p.l.finishRecent(&p.m)
	}
	t.iteration++
	T := t.numSteps()
	t.timesteps += int64(T * t.slots / t.na)
	since := start
	if !t.lastLearn.IsZero() {
		since = t.lastLearn
	}
	t.lastLearn = time.Now()
	out := t.metrics(t.lastLearn.Sub(since), T)
	for _, h := range frags {
		steps := T * h.Slots / t.na
		sps := 0.0
		if h.RolloutSeconds > 0 {
			sps = float64(steps) / h.RolloutSeconds
		}
		eps := 0
		for _, s := range h.Policies {
			eps += len(s.Returns)
		}
		out.Rollouts = append(out.Rollouts, learner.RolloutInfo{Worker: h.Worker, Node: h.Node, WeightVersion: h.WeightVersion, Steps: steps, StepsPerSecond: sps, Episodes: eps})
	}
	return out, nil
}

// decodeFragment opens one worker's multi-agent fragment: its header and
// each learned policy's Fragment bytes, by policy index.
func (t *multiTrainer) decodeFragment(b []byte) (multiFragHeader, [][]byte, error) {
	var h multiFragHeader
	hdr, body, err := learner.Unseal(b, multiFragMagic, multiBusVersion, "multi-agent PPO fragment")
	if err != nil {
		return h, nil, fmt.Errorf("%w: %w", ErrFragment, err)
	}
	if err := json.Unmarshal(hdr, &h); err != nil {
		return h, nil, fmt.Errorf("%w: header: %v", ErrFragment, err)
	}
	if len(h.Policies) != len(t.pols) || h.Slots < t.na || h.Slots%t.na != 0 || (h.Joint != nil && len(h.Joint) != len(t.joint)) {
		return h, nil, fmt.Errorf("%w: %d policies over %d slots; the trainer has %d policies of %d agents", ErrFragment, len(h.Policies), h.Slots, len(t.pols), t.na)
	}
	learned := make([]bool, len(h.Policies))
	for i, s := range h.Policies {
		p := t.pols[i]
		if s.Name != p.name || s.Learned != !p.bookkept() || (len(s.Counts) != 0 && len(s.Counts) != len(p.count)) {
			return h, nil, fmt.Errorf("%w: policy %d is %s, the trainer's is %s", ErrFragment, i, s.Name, p.name)
		}
		learned[i] = s.Learned
	}
	names := make([]string, len(h.Policies))
	for i, s := range h.Policies {
		names[i] = s.Name
	}
	out, err := splitLearned(body, names, learned, ErrFragment)
	if err != nil {
		return h, nil, err
	}
	return h, out, nil
}

// splitLearned splits a payload of uint64-length-prefixed parts, one per
// learned policy of names (in name order), into parts by policy index (nil
// where not learned). kind marks the errors.
func splitLearned(body []byte, names []string, learned []bool, kind error) ([][]byte, error) {
	parts := make([][]byte, len(names))
	p := body
	for i, n := range names {
		if !learned[i] {
			continue
		}
		if len(p) < 8 {
			return nil, fmt.Errorf("%w: policy %s is missing", kind, n)
		}
		size := binary.LittleEndian.Uint64(p)
		if size > uint64(len(p)-8) {
			return nil, fmt.Errorf("%w: policy %s needs %d bytes, %d left", kind, n, size, len(p)-8)
		}
		parts[i], p = p[8:8+size], p[8+size:]
	}
	if len(p) != 0 || !slices.IsSorted(names) {
		return nil, fmt.Errorf("%w: %d bytes after the last policy, or policies out of order", kind, len(p))
	}
	return parts, nil
}
