package pluginhost

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/trainyard/trainyard/internal/names"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// ABIVersion is the plugin ABI this host speaks.
const ABIVersion = 1

// Kind of plugin.
type Kind string

const (
	KindEnv    Kind = "env"
	KindReward Kind = "reward"
	KindGame   Kind = "game"
)

// Metadata is what a plugin's metadata export declares.
type Metadata struct {
	ABIVersion      int        `json:"abi_version"`
	Name            string     `json:"name"`
	Version         string     `json:"version"`
	Kind            Kind       `json:"kind"`
	Description     string     `json:"description,omitempty"`
	Observation     envs.Space `json:"observation_space"`
	Action          envs.Space `json:"action_space"`
	NumPlayers      int        `json:"num_players,omitempty"`
	MaxEpisodeSteps int        `json:"max_episode_steps,omitempty"`
	StateBytes      int        `json:"state_bytes,omitempty"`
	// Capabilities the plugin asks for (e.g. "http"); granted per run by
	// passing matching HostFuncs to Load. Declared here so policy can see them.
	Capabilities []string `json:"capabilities,omitempty"`
	// Agents names a multi-agent env's agents (envs.Spec.MultiAgent): its
	// batch's slots are agents, so NewVecEnv's n is instances × agents.
	Agents []string `json:"agents,omitempty"`
	// ActionMask: the last action_space.n observation values are the legal
	// actions (envs.Spec.ActionMask).
	ActionMask bool `json:"action_mask,omitempty"`
}

// Spec is the envs.Spec of an env plugin.
func (m Metadata) Spec() envs.Spec {
	return envs.Spec{Name: m.Name, Observation: m.Observation, Action: m.Action, MaxEpisodeSteps: m.MaxEpisodeSteps, Agents: m.Agents, ActionMask: m.ActionMask}
}

// Label names the plugin in errors and logs.
func (m Metadata) Label() string { return m.Name + "@" + m.Version }

// parseMetadata decodes and checks a metadata document.
func parseMetadata(b []byte, l Limits) (Metadata, error) {
	var m Metadata
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("%w: decode JSON: %v", ErrMetadata, err)
	}
	if m.ABIVersion != ABIVersion {
		return m, fmt.Errorf("%w: metadata says abi_version %d, host speaks %d", ErrABIVersion, m.ABIVersion, ABIVersion)
	}
	if err := names.Plugin.Check(m.Name); err != nil {
		return m, fmt.Errorf("%w: name: %v", ErrMetadata, err)
	}
	if err := names.Version.Check(m.Version); err != nil {
		return m, fmt.Errorf("%w: version: %v", ErrMetadata, err)
	}
	if m.MaxEpisodeSteps < 0 {
		return m, fmt.Errorf("%w: max_episode_steps %d < 0", ErrMetadata, m.MaxEpisodeSteps)
	}
	switch m.Kind {
	case KindEnv:
		if err := checkSpace("observation_space", m.Observation, l, false); err != nil {
			return m, err
		}
		if err := checkSpace("action_space", m.Action, l, false); err != nil {
			return m, err
		}
		if err := checkAgents(m.Agents); err != nil {
			return m, err
		}
		if err := checkActionMask(m); err != nil {
			return m, err
		}
	case KindReward:
		// Empty spaces mean "composes with any env".
		if err := checkSpace("observation_space", m.Observation, l, true); err != nil {
			return m, err
		}
		if err := checkSpace("action_space", m.Action, l, true); err != nil {
			return m, err
		}
	case KindGame:
		if m.NumPlayers < 1 || m.NumPlayers > 64 {
			return m, fmt.Errorf("%w: num_players %d, want 1-64", ErrMetadata, m.NumPlayers)
		}
		if err := checkSpace("observation_space", m.Observation, l, false); err != nil {
			return m, err
		}
		if m.Action.Kind != envs.Discrete {
			return m, fmt.Errorf("%w: game action_space must be discrete, got %q", ErrMetadata, m.Action.Kind)
		}
		if err := checkSpace("action_space", m.Action, l, false); err != nil {
			return m, err
		}
		if m.StateBytes < 0 || m.StateBytes > l.MaxStateBytes {
			return m, fmt.Errorf("%w: state_bytes %d outside [0,%d]", ErrMetadata, m.StateBytes, l.MaxStateBytes)
		}
	default:
		return m, fmt.Errorf("%w: kind %q, want env, reward or game", ErrMetadata, m.Kind)
	}
	return m, nil
}

// checkActionMask: a mask needs discrete actions and a flat observation
// wide enough to end in one value per action.
func checkActionMask(m Metadata) error {
	if !m.ActionMask {
		return nil
	}
	if m.Action.Kind != envs.Discrete {
		return fmt.Errorf("%w: action_mask: needs a discrete action_space, got %q", ErrMetadata, m.Action.Kind)
	}
	if m.Observation.Kind != envs.Box || len(m.Observation.Shape) != 1 || m.Observation.Dim() < m.Action.N {
		return fmt.Errorf("%w: action_mask: the observation_space must be a flat box of at least %d values (one per action, last)", ErrMetadata, m.Action.N)
	}
	return nil
}

// maxAgents bounds a multi-agent env's agents.
const maxAgents = 64

func checkAgents(agents []string) error {
	if len(agents) > maxAgents {
		return fmt.Errorf("%w: agents: %d agents, at most %d", ErrMetadata, len(agents), maxAgents)
	}
	seen := map[string]bool{}
	for i, a := range agents {
		if err := names.Agent.Check(a); err != nil {
			return fmt.Errorf("%w: agents[%d]: %v", ErrMetadata, i, err)
		}
		if seen[a] {
			return fmt.Errorf("%w: agents[%d]: %q named twice", ErrMetadata, i, a)
		}
		seen[a] = true
	}
	return nil
}

func checkSpace(field string, s envs.Space, l Limits, optional bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrMetadata, field, fmt.Sprintf(format, args...))
	}
	switch s.Kind {
	case "":
		if optional {
			return nil
		}
		return bad("missing kind")
	case envs.Box:
		if len(s.Shape) == 0 {
			return bad("box needs a shape")
		}
		d := 1
		for _, x := range s.Shape {
			if x <= 0 || x > l.MaxDim {
				return bad("shape %v has a dimension outside [1,%d]", s.Shape, l.MaxDim)
			}
			d *= x
			if d > l.MaxDim {
				return bad("shape %v has more than %d values", s.Shape, l.MaxDim)
			}
		}
		if len(s.Low) != len(s.High) || (len(s.Low) != 0 && len(s.Low) != d) {
			return bad("low/high have %d/%d values, want 0 or %d", len(s.Low), len(s.High), d)
		}
		for i := range s.Low {
			if !(s.Low[i] <= s.High[i]) {
				return bad("low[%d]=%v > high[%d]=%v", i, s.Low[i], i, s.High[i])
			}
		}
	case envs.Discrete:
		if s.N < 1 || s.N > l.MaxDim {
			return bad("discrete n %d outside [1,%d]", s.N, l.MaxDim)
		}
	case envs.MultiDiscrete:
		if len(s.Nvec) == 0 || len(s.Nvec) > l.MaxDim {
			return bad("nvec has %d entries, want 1-%d", len(s.Nvec), l.MaxDim)
		}
		for _, n := range s.Nvec {
			if n < 1 || n > 1<<24 {
				return bad("nvec entry %d outside [1,%d]", n, 1<<24)
			}
		}
	default:
		return bad("unknown space kind %q", s.Kind)
	}
	return nil
}
