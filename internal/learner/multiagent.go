package learner

import (
	"fmt"
	"math/bits"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/trainyard/trainyard/internal/names"
)

// MultiAgent is a multi-agent run's policies (RLlib's multi_agent(policies,
// policy_mapping_fn, policies_to_train)): every agent of the env acts by
// one policy; a policy mapped to several agents shares its parameters
// among them.
type MultiAgent struct {
	// Policies by name. Default: one policy, DefaultPolicy.
	Policies map[string]Policy `json:"policies,omitempty"`
	// Mapping maps an agent, by its name or by a pattern (path.Match:
	// agent_*), to a policy. An agent's own name wins over patterns, and
	// a pattern with more literal characters over one with fewer. Default
	// with one policy: every agent to it.
	Mapping map[string]string `json:"policy_mapping,omitempty"`
	// Train names the policies that learn; the others stay frozen.
	// Default: every policy that is not a script, a checkpoint or a
	// league member.
	Train []string `json:"policies_to_train,omitempty"`
	// League maps an agent (by name or pattern, as Mapping) to the frozen
	// policies it plays: at the start of each of its episodes one is
	// drawn, uniformly (a league: each episode's opponent from a set). A
	// league member plays only there; Mapping need not name the agent.
	League map[string][]string `json:"league,omitempty"`
}

// Policy is one policy of a multi-agent run: a network of the algorithm
// with its own hyper-parameters (over the run's), a fixed script, or a
// network frozen from an earlier run's checkpoint.
type Policy struct {
	Hyperparameters map[string]any `json:"hyperparameters,omitempty" doc:"Overrides of the run's hyper-parameters for this policy's network (num_steps is the run's for every policy)."`
	Script          string         `json:"script,omitempty" doc:"A fixed policy instead of a network (GET /v1/algorithms lists the scripts; tit_for_tat for PrisonersDilemma-v0). A script never trains."`
	Checkpoint      string         `json:"checkpoint,omitempty" maxLength:"200" doc:"A network frozen from an earlier run of the same env: RUN_ID or RUN_ID@SEQ (submission pins the run's latest checkpoint), then :POLICY for one of that run's policies (default: the one of this policy's name, else its only trained one). It never trains."`
}

// Imported reports whether the policy's network comes from an earlier
// run's checkpoint.
func (p Policy) Imported() bool { return p.Checkpoint != "" }

// CheckpointRef is a parsed Policy.Checkpoint.
type CheckpointRef struct {
	Run string
	// Seq is the checkpoint; 0 until submission pins one.
	Seq    int64
	Policy string // "": the default (see Policy.Checkpoint)
}

// ParseCheckpointRef parses RUN_ID[@SEQ][:POLICY].
func ParseCheckpointRef(s string) (CheckpointRef, error) {
	var r CheckpointRef
	rest, pol, hasPol := strings.Cut(s, ":")
	run, seq, hasSeq := strings.Cut(rest, "@")
	r.Run, r.Policy = run, pol
	if run == "" || strings.ContainsAny(run, "/ ") || len(run) > 128 {
		return r, fmt.Errorf("%q: want RUN_ID[@SEQ][:POLICY]", s)
	}
	if hasSeq {
		n, err := strconv.ParseInt(seq, 10, 64)
		if err != nil || n < 1 {
			return r, fmt.Errorf("%q: the checkpoint after @ is a number ≥ 1", s)
		}
		r.Seq = n
	}
	if hasPol {
		if err := names.Policy.Check(pol); err != nil {
			return r, fmt.Errorf("%q: policy: %v", s, err)
		}
	}
	return r, nil
}

// String is the ref in Policy.Checkpoint's form.
func (r CheckpointRef) String() string {
	s := r.Run
	if r.Seq > 0 {
		s += "@" + strconv.FormatInt(r.Seq, 10)
	}
	if r.Policy != "" {
		s += ":" + r.Policy
	}
	return s
}

// DefaultPolicy is the policy a multi-agent run without policies has.
const DefaultPolicy = "shared"

// Resolved is a MultiAgent checked against an env's agents.
type Resolved struct {
	// Names are the policies, sorted; Agent[a] indexes Names for agent a,
	// -1 for a league agent.
	Names  []string
	Agent  []int
	Policy []Policy
	Train  []bool
	// League[a] indexes Names for league agent a's members (nil for the
	// others); Member[i] says policy i plays only in a league.
	League [][]int
	Member []bool
}

// Drawn is the member league agent a plays in its episode-th episode of
// instance inst (seed: the run's): a hash, so resuming needs no random
// state and every worker draws its own instances' opponents.
func (r Resolved) Drawn(seed uint64, a, inst int, episode int64) int {
	x := mix(mix(mix(seed^0x9E3779B97F4A7C15)+uint64(a)) + uint64(inst)<<20 + uint64(episode))
	ms := r.League[a]
	hi, _ := bits.Mul64(x, uint64(len(ms))) // uniform over the members, from x's high bits
	return ms[hi]
}

// mix is splitmix64's finaliser: every input bit reaches every output bit.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ x>>31
}

// Resolve checks m against the env's agents (a nil m is the default) and
// maps every agent to a policy. Errors name the spec field.
func (m *MultiAgent) Resolve(agents []string) (Resolved, error) {
	var ma MultiAgent
	if m != nil {
		ma = *m
	}
	if len(agents) == 0 {
		if m != nil && (len(ma.Policies) > 0 || len(ma.Mapping) > 0 || len(ma.Train) > 0 || len(ma.League) > 0) {
			return Resolved{}, &FieldError{Field: "policies", Reason: "the env is single-agent: policies, policy_mapping, policies_to_train and league are for multi-agent envs"}
		}
		return Resolved{}, nil
	}
	if len(ma.Policies) == 0 {
		ma.Policies = map[string]Policy{DefaultPolicy: {}}
	}
	var r Resolved
	r.Names = slices.Sorted(func(yield func(string) bool) {
		for k := range ma.Policies {
			if !yield(k) {
				return
			}
		}
	})
	for _, n := range r.Names {
		if err := names.Policy.Check(n); err != nil {
			return r, &FieldError{Field: "policies", Reason: err.Error()}
		}
		p := ma.Policies[n]
		switch {
		case p.Script != "" && len(p.Hyperparameters) > 0:
			return r, &FieldError{Field: "policies." + n, Reason: "a script has no hyper-parameters"}
		case p.Imported() && p.Script != "":
			return r, &FieldError{Field: "policies." + n, Reason: "a policy is a script or a checkpoint, not both"}
		case p.Imported() && len(p.Hyperparameters) > 0:
			return r, &FieldError{Field: "policies." + n, Reason: "a checkpoint's network keeps its own hyper-parameters"}
		}
		if p.Imported() {
			if _, err := ParseCheckpointRef(p.Checkpoint); err != nil {
				return r, &FieldError{Field: "policies." + n + ".checkpoint", Reason: err.Error()}
			}
		}
		r.Policy = append(r.Policy, p)
	}
	league, err := r.resolveLeague(ma.League, agents)
	if err != nil {
		return r, err
	}
	if len(ma.Mapping) == 0 {
		if len(r.Names) > 1 {
			return r, &FieldError{Field: "policy_mapping", Reason: fmt.Sprintf("required with %d policies: map each agent (%s) to one", len(r.Names), strings.Join(agents, ", "))}
		}
		ma.Mapping = map[string]string{"*": r.Names[0]}
	}
	for pat, pol := range ma.Mapping {
		if _, err := path.Match(pat, ""); err != nil {
			return r, &FieldError{Field: "policy_mapping", Reason: fmt.Sprintf("pattern %q: %v", pat, err)}
		}
		if _, ok := ma.Policies[pol]; !ok {
			return r, &FieldError{Field: "policy_mapping." + pat, Reason: fmt.Sprintf("policy %q is not in policies (%s)", pol, strings.Join(r.Names, ", "))}
		}
	}
	used := slices.Clone(r.Member)
	for a, name := range agents {
		if league[a] {
			r.Agent = append(r.Agent, -1)
			continue
		}
		pat, ok, err := matchAgent(ma.Mapping, name, "policy_mapping")
		if err != nil {
			return r, err
		}
		if !ok {
			return r, &FieldError{Field: "policy_mapping", Reason: fmt.Sprintf("no entry maps agent %q", name)}
		}
		i, _ := slices.BinarySearch(r.Names, ma.Mapping[pat])
		if r.Member[i] {
			return r, &FieldError{Field: "policy_mapping." + pat, Reason: fmt.Sprintf("policy %q is a league member: it plays only in the league", r.Names[i])}
		}
		r.Agent = append(r.Agent, i)
		used[i] = true
	}
	for i, u := range used {
		if !u {
			return r, &FieldError{Field: "policies." + r.Names[i], Reason: fmt.Sprintf("no agent is mapped to it (agents: %s)", strings.Join(agents, ", "))}
		}
	}
	if err := r.resolveTrain(ma.Train); err != nil {
		return r, err
	}
	return r, nil
}

// resolveTrain sets r.Train from policies_to_train (nil: the default).
func (r *Resolved) resolveTrain(train []string) error {
	r.Train = make([]bool, len(r.Names))
	if train == nil {
		for i, p := range r.Policy {
			r.Train[i] = p.Script == "" && !p.Imported() && !r.Member[i]
		}
	}
	for _, n := range train {
		i, ok := slices.BinarySearch(r.Names, n)
		switch {
		case !ok:
			return &FieldError{Field: "policies_to_train", Reason: fmt.Sprintf("policy %q is not in policies (%s)", n, strings.Join(r.Names, ", "))}
		case r.Policy[i].Script != "":
			return &FieldError{Field: "policies_to_train", Reason: fmt.Sprintf("policy %q is the script %s, which cannot train", n, r.Policy[i].Script)}
		case r.Policy[i].Imported():
			return &FieldError{Field: "policies_to_train", Reason: fmt.Sprintf("policy %q is frozen from checkpoint %s", n, r.Policy[i].Checkpoint)}
		case r.Member[i]:
			return &FieldError{Field: "policies_to_train", Reason: fmt.Sprintf("policy %q is a league member, which stays frozen", n)}
		}
		r.Train[i] = true
	}
	if !slices.Contains(r.Train, true) {
		return &FieldError{Field: "policies_to_train", Reason: "no policy trains"}
	}
	return nil
}

// resolveLeague checks a league against the policies (r.Names) and the
// env's agents, setting r.Member and r.League; league[a] says agent a
// plays in it.
func (r *Resolved) resolveLeague(lg map[string][]string, agents []string) ([]bool, error) {
	r.Member = make([]bool, len(r.Names))
	for pat, members := range lg {
		if _, err := path.Match(pat, ""); err != nil {
			return nil, &FieldError{Field: "league", Reason: fmt.Sprintf("pattern %q: %v", pat, err)}
		}
		if len(members) == 0 {
			return nil, &FieldError{Field: "league." + pat, Reason: "name the policies the agent plays"}
		}
		for _, n := range members {
			i, ok := slices.BinarySearch(r.Names, n)
			if !ok {
				return nil, &FieldError{Field: "league." + pat, Reason: fmt.Sprintf("policy %q is not in policies (%s)", n, strings.Join(r.Names, ", "))}
			}
			r.Member[i] = true
		}
	}
	league := make([]bool, len(agents))
	if len(lg) > 0 {
		r.League = make([][]int, len(agents))
	}
	for a, name := range agents {
		pat, ok, err := matchAgent(lg, name, "league")
		if err != nil {
			return nil, err
		}
		league[a] = ok
		for _, n := range lg[pat] {
			if i, _ := slices.BinarySearch(r.Names, n); ok && !slices.Contains(r.League[a], i) {
				r.League[a] = append(r.League[a], i)
			}
		}
	}
	if len(lg) > 0 && !slices.Contains(league, false) {
		return nil, &FieldError{Field: "league", Reason: "every agent plays in the league: none is left to learn"}
	}
	return league, nil
}

// matchAgent finds the key of m that names agent: its own name, else the
// pattern with the most literal characters (what errors say: field).
func matchAgent[V any](m map[string]V, agent, field string) (string, bool, error) {
	if _, ok := m[agent]; ok {
		return agent, true, nil
	}
	best, bestLit, tie := "", -1, false
	for pat := range m {
		if ok, _ := path.Match(pat, agent); !ok {
			continue
		}
		lit := len(pat) - strings.Count(pat, "*") - strings.Count(pat, "?")
		switch {
		case lit > bestLit:
			best, bestLit, tie = pat, lit, false
		case lit == bestLit:
			tie = true
			best = min(best, pat)
		}
	}
	switch {
	case bestLit < 0:
		return "", false, nil
	case tie:
		return "", false, &FieldError{Field: field, Reason: fmt.Sprintf("agent %q matches more than one pattern as specifically (%s and another)", agent, best)}
	}
	return best, true, nil
}
