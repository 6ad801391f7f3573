package ppo

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Multi-agent checkpoint format, version 1 (learner.Seal frames it):
//
//	magic   "TYMAPPOK"
//	version uint32
//	hdrLen  uint32, then JSON (multiHeader)
//	per learned policy, in name order: uint64 length, its PPO checkpoint
//	sha256 of everything above
const (
	multiMagic   = "TYMAPPOK"
	multiVersion = 1
)

type multiHeader struct {
	Env         string           `json:"env"`
	Agents      []string         `json:"agents"`
	Slots       int              `json:"slots"`
	Seed        uint64           `json:"seed"`
	Policies    []string         `json:"policies"`
	Specs       []learner.Policy `json:"policy_specs"`
	Agent       []int            `json:"agent_policy"`
	Train       []bool           `json:"train"`
	Iteration   int64            `json:"iteration"`
	Timesteps   int64            `json:"timesteps"`
	Obs         []float32        `json:"obs"`
	Scripts     []scriptState    `json:"scripts"` // every bookkept policy's (a script, a league member), in order
	League      [][]int          `json:"league,omitempty"`
	Member      []bool           `json:"league_member,omitempty"`
	Seats       []seatState      `json:"seats,omitempty"`
	EnvSnapshot []byte           `json:"env_snapshot,omitempty"`
}

type scriptState struct {
	EpRet  []float64 `json:"episode_return"`
	Recent []float64 `json:"recent_returns"`
	Next   int       `json:"recent_next"`
	N      int       `json:"recent_n"`
}

// Save writes every policy (each learned one's whole PPO state), the
// mapping, the counters, the current observations and the env's state.
func (m *multi) Save(w io.Writer) error {
	h := multiHeader{Env: m.spec.Name, Agents: m.spec.Agents, Slots: m.slots, Seed: m.seed,
		Policies: m.res.Names, Specs: m.res.Policy, Agent: m.res.Agent, Train: m.res.Train,
		Iteration: m.iteration, Timesteps: m.timesteps, Obs: m.obs,
		League: m.res.League, Member: m.res.Member, Seats: m.seatStates()}
	var payload []byte
	for _, p := range m.pols {
		if p.bookkept() {
			s := p.stats
			h.Scripts = append(h.Scripts, scriptState{EpRet: s.epRet, Recent: s.recent.buf, Next: s.recent.next, N: s.recent.n})
		}
		if p.l == nil {
			continue
		}
		var b bytes.Buffer
		if err := p.l.Save(&b); err != nil {
			return fmt.Errorf("ppo: save policy %s: %w", p.name, err)
		}
		payload = binary.LittleEndian.AppendUint64(payload, uint64(b.Len()))
		payload = append(payload, b.Bytes()...)
	}
	if s, ok := m.env.(Snapshotter); ok {
		var err error
		if h.EnvSnapshot, err = s.Snapshot(); err != nil {
			return fmt.Errorf("ppo: save: env %s: %w", m.spec.Name, err)
		}
	}
	hdr, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("ppo: save: header: %w", err)
	}
	if _, err := w.Write(learner.Seal(multiMagic, multiVersion, hdr, payload)); err != nil {
		return fmt.Errorf("ppo: save: %w", err)
	}
	return nil
}

// restoreMulti continues a multi-agent checkpoint on env: exactly, when
// the env can put its state back; otherwise with fresh episodes.
func restoreMulti(data []byte, env envs.VecEnv) (*multi, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("ppo: restore: %w: %s", ErrCheckpoint, fmt.Sprintf(format, a...))
	}
	hdr, body, err := learner.Unseal(data, multiMagic, multiVersion, "multi-agent PPO")
	if err != nil {
		return nil, fmt.Errorf("ppo: restore: %w", err)
	}
	var h multiHeader
	if err := json.Unmarshal(hdr, &h); err != nil {
		return nil, bad("header: %v", err)
	}
	spec := env.Spec()
	switch {
	case h.Env != spec.Name || !slices.Equal(h.Agents, spec.Agents) || h.Slots != env.NumEnvs():
		return nil, bad("it is for %d slots of %s (agents %v), the env is %d of %s (agents %v)", h.Slots, h.Env, h.Agents, env.NumEnvs(), spec.Name, spec.Agents)
	case len(h.Policies) == 0 || len(h.Specs) != len(h.Policies) || len(h.Train) != len(h.Policies) || len(h.Agent) != len(h.Agents):
		return nil, bad("the policies do not add up")
	case len(h.Obs) != h.Slots*spec.Observation.Dim() || h.Iteration < 0 || h.Timesteps < 0:
		return nil, bad("per-slot state has the wrong size")
	}
	if !leagueFits(h) {
		return nil, bad("the league does not add up")
	}
	for a, i := range h.Agent {
		if (i < 0 || i >= len(h.Policies)) && (i != -1 || h.League == nil || len(h.League[a]) == 0) {
			return nil, bad("an agent maps to policy %d of %d", i, len(h.Policies))
		}
	}
	res := learner.Resolved{Names: h.Policies, Agent: h.Agent, Policy: h.Specs, Train: h.Train, League: h.League, Member: h.Member}
	subs, err := policyPayloads(h, body)
	if err != nil {
		return nil, fmt.Errorf("ppo: restore: %w", err)
	}
	scripts := h.Scripts
	m, err := newMulti(env, res, make([]*Config, len(h.Policies)), h.Seed, func(pol *maPolicy, view envs.VecEnv, _ Config) error {
		i, _ := slices.BinarySearch(h.Policies, pol.name)
		l, err := Restore(bytes.NewReader(subs[i]), view)
		pol.l = l
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ppo: restore: %w", err)
	}
	for _, pol := range m.pols {
		if !pol.bookkept() {
			continue
		}
		if len(scripts) == 0 {
			return nil, bad("script %s's state is missing", pol.name)
		}
		st := scripts[0]
		scripts = scripts[1:]
		s := &pol.stats
		if len(st.EpRet) != len(s.epRet) || !s.recent.restore(st.Recent, st.Next, st.N) {
			return nil, bad("script %s's state has the wrong size", pol.name)
		}
		copy(s.epRet, st.EpRet)
	}
	m.iteration, m.timesteps = h.Iteration, h.Timesteps
	if !m.restoreSeats(h.Seats) {
		return nil, bad("the league's seats have the wrong size")
	}
	if s, ok := env.(Snapshotter); ok && len(h.EnvSnapshot) > 0 {
		if err := s.RestoreSnapshot(h.EnvSnapshot); err != nil {
			return nil, fmt.Errorf("ppo: restore: env %s: %w", spec.Name, err)
		}
		copy(m.obs, h.Obs)
		m.scatterObs()
		return m, nil
	}
	// The env cannot be put back: fresh episodes, every policy's
	// unfinished ones dropped.
	for _, pol := range m.pols {
		if l := pol.l; l != nil {
			clear(l.epRet)
			clear(l.epLen)
			clear(l.ret)
		}
		clear(pol.stats.epRet)
	}
	for _, s := range m.seats {
		clear(s.epRet)
	}
	if err := m.start(h.Seed ^ (uint64(h.Timesteps) * 0x9E3779B97F4A7C15)); err != nil {
		return nil, fmt.Errorf("ppo: restore: %w", err)
	}
	return m, nil
}

// newMultiLearner is a fresh multi-agent learner on env: res's policies,
// each learned one from its config (cfgs) and its own seed, each imported
// one from the checkpoint imports holds for it.
func newMultiLearner(env envs.VecEnv, res learner.Resolved, cfgs []*Config, seed uint64, imports map[string][]byte) (*multi, error) {
	m, err := newMulti(env, res, cfgs, seed, func(pol *maPolicy, view envs.VecEnv, c Config) error {
		i, _ := slices.BinarySearch(res.Names, pol.name)
		if spec := res.Policy[i]; spec.Imported() {
			ref, err := learner.ParseCheckpointRef(spec.Checkpoint)
			if err != nil {
				return err
			}
			data, ok := imports[pol.name]
			if !ok {
				return fmt.Errorf("ppo: policy %s: checkpoint %s was not read", pol.name, spec.Checkpoint)
			}
			pol.l, err = importPolicy(data, ref.Policy, pol.name, view, c)
			return err
		}
		l, err := New(view, c)
		pol.l = l
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := m.start(seed); err != nil {
		return nil, err
	}
	return m, nil
}

// importPolicy is a policy of another run's multi-agent checkpoint (data)
// as a frozen learner on view: its network and observation statistics,
// fresh per-env state, stepping this run's cfg.NumSteps with cfg's seed.
// want names the policy in the checkpoint; "" is self's name if the
// checkpoint has a learned policy of that name, else its only trained one.
func importPolicy(data []byte, want, self string, view envs.VecEnv, cfg Config) (*Learner, error) {
	old, err := importedLearner(data, want, self, view.Spec())
	if err != nil {
		return nil, err
	}
	c := old.cfg
	c.NumSteps, c.Seed, c.Workers = cfg.NumSteps, cfg.Seed, cfg.Workers
	l, err := New(view, c)
	if err != nil {
		return nil, fmt.Errorf("ppo: import policy %s: %w", self, err)
	}
	copy(l.params, old.params)
	l.obsRMS, l.retRMS = old.obsRMS, old.retRMS
	return l, nil
}

// CheckImport reports whether data, an earlier run's checkpoint, holds a
// learned policy (want; "" the default, see importPolicy) that policy self
// of a run on env can be (learner.Importer).
func (Factory) CheckImport(data []byte, env envs.Spec, self, want string) error {
	view := env
	view.Agents = nil
	_, err := importedLearner(data, want, self, view)
	return err
}

// importedLearner restores the chosen policy of a multi-agent checkpoint
// on a view of its own slots (spec: a policy's view of the env).
func importedLearner(data []byte, want, self string, spec envs.Spec) (*Learner, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("ppo: import policy %s: %w: %s", self, ErrCheckpoint, fmt.Sprintf(format, a...))
	}
	hdr, body, err := learner.Unseal(data, multiMagic, multiVersion, "multi-agent PPO")
	if err != nil {
		return nil, fmt.Errorf("ppo: import policy %s: %w", self, err)
	}
	var h multiHeader
	if err := json.Unmarshal(hdr, &h); err != nil {
		return nil, bad("header: %v", err)
	}
	if h.Env != spec.Name || len(h.Agents) == 0 || h.Slots%len(h.Agents) != 0 || len(h.Specs) != len(h.Policies) || len(h.Agent) != len(h.Agents) || len(h.Train) != len(h.Policies) {
		return nil, bad("it is a checkpoint of %s, not %s", h.Env, spec.Name)
	}
	var learned, trained []string
	for i, n := range h.Policies {
		if h.Specs[i].Script == "" {
			learned = append(learned, n)
			if h.Train[i] {
				trained = append(trained, n)
			}
		}
	}
	switch {
	case want != "":
	case slices.Contains(learned, self):
		want = self
	case len(trained) == 1:
		want = trained[0]
	default:
		return nil, bad("name one of its policies (%v)", learned)
	}
	subs, err := policyPayloads(h, body)
	if err != nil {
		return nil, fmt.Errorf("ppo: import policy %s: %w", self, err)
	}
	for i, n := range h.Policies {
		if h.Specs[i].Script != "" || n != want {
			continue
		}
		agents := 0
		for _, a := range h.Agent {
			if a == i {
				agents++
			}
		}
		old, err := Restore(bytes.NewReader(subs[i]), slotView{spec: spec, n: max(1, h.Slots/len(h.Agents)*agents)})
		if err != nil {
			return nil, fmt.Errorf("ppo: import policy %s from %s: %w", self, want, err)
		}
		return old, nil
	}
	return nil, bad("it has no learned policy %s (it has %v)", want, learned)
}

// policyPayloads splits a multi-agent checkpoint's payload into each
// learned policy's PPO checkpoint, by policy index (nil for a script).
func policyPayloads(h multiHeader, body []byte) ([][]byte, error) {
	learned := make([]bool, len(h.Policies))
	for i := range h.Policies {
		learned[i] = h.Specs[i].Script == ""
	}
	return splitLearned(body, h.Policies, learned, ErrCheckpoint)
}

// leagueFits checks a checkpoint's league against its agents and policies.
func leagueFits(h multiHeader) bool {
	if h.Member != nil && len(h.Member) != len(h.Policies) {
		return false
	}
	if h.League == nil {
		return true
	}
	if len(h.League) != len(h.Agents) || h.Member == nil {
		return false
	}
	for _, ms := range h.League {
		for _, i := range ms {
			if i < 0 || i >= len(h.Policies) || !h.Member[i] {
				return false
			}
		}
	}
	return true
}
