// Package params is the typed view of the policy data document
// (policies/data.json, key trainyard.params). The Rego policies and the Go
// scheduler read the same numbers from it, so a reviewed bundle change (say,
// the capacity share) moves admission and placement together. It has no OPA
// dependency, so deterministic workflow code can use it.
package params

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Params mirrors data.trainyard.params.
type Params struct {
	CapacityShare        float64            `json:"capacity_share"`
	GPUPreservation      GPUPreservation    `json:"gpu_preservation"`
	Tiers                []Tier             `json:"tiers"`
	TierPreferences      map[string][]int   `json:"tier_preferences"`
	BoardMinVRAMMB       map[string]int     `json:"board_min_vram_mb"`
	ConfigQuotas         map[string]float64 `json:"config_quotas"`
	QuotaWindowHours     float64            `json:"quota_window_hours"`
	MaxTrainingPerConfig int                `json:"max_training_per_config"`
	Starvation           Starvation         `json:"starvation"`
	Providers            Providers          `json:"providers"`
	reservedSet          map[string]bool
	tiersBestFirst       []Tier
	quotaPatterns        []string
}

// GPUPreservation keeps GPUs for inference: Reserved lists "node:index"
// keys, ReservedPerNode reserves the lowest indices of every GPU node.
type GPUPreservation struct {
	Enabled         bool     `json:"enabled"`
	Reserved        []string `json:"reserved"`
	ReservedPerNode int      `json:"reserved_per_node"`
	CPUOnlyRoles    []string `json:"cpu_only_roles"`
}

// Tier is a GPU tier and the node-total VRAM floor that reaches it.
type Tier struct {
	Tier      int `json:"tier"`
	MinVRAMMB int `json:"min_vram_mb"`
}

// Starvation: work waiting at least BoostAfterSeconds gets Boost added to
// its priority.
type Starvation struct {
	BoostAfterSeconds int64 `json:"boost_after_seconds"`
	Boost             int   `json:"boost"`
}

// Providers holds which providers are ephemeral, their cost, and each work
// kind's preferences.
type Providers struct {
	Ephemeral      []string              `json:"ephemeral"`
	CostPerGPUHour map[string]float64    `json:"cost_per_gpu_hour"`
	Preferences    map[string]Preference `json:"preferences"`
}

// Preference of one work kind.
type Preference struct {
	Prefer   []string `json:"prefer"`
	Fallback []string `json:"fallback"`
	Avoid    []string `json:"avoid"`
}

// Default is the shipped policy data's values, for callers without a
// bundle (tests, a scheduler run before policies load).
func Default() Params {
	p, err := Parse([]byte(defaultJSON))
	if err != nil {
		panic(fmt.Sprintf("params: default data does not parse: %v", err))
	}
	return p
}

// Parse reads the params from a whole data document ({"trainyard":
// {"params": ...}}) or from the params object itself.
func Parse(data []byte) (Params, error) {
	var doc struct {
		Trainyard *struct {
			Params json.RawMessage `json:"params"`
		} `json:"trainyard"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return Params{}, fmt.Errorf("parse policy data: %w", err)
	}
	raw := json.RawMessage(data)
	if doc.Trainyard != nil {
		if doc.Trainyard.Params == nil {
			return Params{}, fmt.Errorf("parse policy data: trainyard.params is missing")
		}
		raw = doc.Trainyard.Params
	}
	p := Params{CapacityShare: 0.9, MaxTrainingPerConfig: 1}
	if err := json.Unmarshal(raw, &p); err != nil {
		return Params{}, fmt.Errorf("parse policy params: %w", err)
	}
	if p.CapacityShare <= 0 || p.CapacityShare > 1 {
		return Params{}, fmt.Errorf("parse policy params: capacity_share %v: must be in (0, 1]", p.CapacityShare)
	}
	p.index()
	return p, nil
}

// FromData converts an already decoded data document (as a policy bundle
// holds it) into Params; the document must hold trainyard.params.
func FromData(data map[string]any) (Params, error) {
	if ty, ok := data["trainyard"].(map[string]any); !ok || ty["params"] == nil {
		return Params{}, fmt.Errorf("policy data: trainyard.params is missing")
	}
	b, err := json.Marshal(data)
	if err != nil {
		return Params{}, fmt.Errorf("encode policy data: %w", err)
	}
	return Parse(b)
}

func (p *Params) index() {
	p.reservedSet = make(map[string]bool, len(p.GPUPreservation.Reserved))
	for _, k := range p.GPUPreservation.Reserved {
		p.reservedSet[k] = true
	}
	p.tiersBestFirst = slices.Clone(p.Tiers)
	sort.Slice(p.tiersBestFirst, func(i, j int) bool {
		return p.tiersBestFirst[i].Tier < p.tiersBestFirst[j].Tier
	})
	for k := range p.ConfigQuotas {
		if strings.Contains(k, "*") {
			p.quotaPatterns = append(p.quotaPatterns, k)
		}
	}
	sort.Strings(p.quotaPatterns)
}

// ReservedGPU says whether GPU idx of a node is kept for inference.
// gpuIndices are all of the node's GPU indices (for ReservedPerNode).
func (p Params) ReservedGPU(node string, idx int, gpuIndices []int) bool {
	gp := p.GPUPreservation
	if !gp.Enabled {
		return false
	}
	if p.reservedSet[node+":"+strconv.Itoa(idx)] {
		return true
	}
	if gp.ReservedPerNode <= 0 {
		return false
	}
	lower := 0
	for _, i := range gpuIndices {
		if i < idx {
			lower++
		}
	}
	return lower < gp.ReservedPerNode
}

// CPUOnlyRole says whether preservation keeps a role off GPUs.
func (p Params) CPUOnlyRole(role string) bool {
	return p.GPUPreservation.Enabled && slices.Contains(p.GPUPreservation.CPUOnlyRoles, role)
}

// TierOf classifies a node by its total VRAM; 0 means no tier.
func (p Params) TierOf(totalVRAMMB int) int {
	for _, t := range p.tiersBestFirst {
		if totalVRAMMB >= t.MinVRAMMB {
			return t.Tier
		}
	}
	return 0
}

// BoardOf is the board of a config: its prefix before "_".
func BoardOf(config string) string {
	b, _, _ := strings.Cut(config, "_")
	return b
}

// MinVRAMMB is the board's minimum VRAM per GPU; ok is false for a board
// without an entry.
func (p Params) MinVRAMMB(board string) (int, bool) {
	v, ok := p.BoardMinVRAMMB[board]
	return v, ok
}

// Quota is a config's share of Tier-1 time: an exact key first, else the
// smallest matching glob (as the Rego does).
func (p Params) Quota(config string) (float64, bool) {
	if q, ok := p.ConfigQuotas[config]; ok {
		return q, true
	}
	best, found := 0.0, false
	for _, pat := range p.quotaPatterns {
		if ok, _ := path.Match(pat, config); ok {
			if q := p.ConfigQuotas[pat]; !found || q < best {
				best, found = q, true
			}
		}
	}
	return best, found
}

// QuotaWindow is the rolling window usage is summed over.
func (p Params) QuotaWindow() time.Duration {
	if p.QuotaWindowHours <= 0 {
		return 24 * time.Hour
	}
	return time.Duration(p.QuotaWindowHours * float64(time.Hour))
}

// EffectivePriority adds the starvation boost once work has waited long
// enough.
func (p Params) EffectivePriority(priority int, waited time.Duration) int {
	s := p.Starvation
	if s.BoostAfterSeconds > 0 && waited >= time.Duration(s.BoostAfterSeconds)*time.Second {
		return priority + s.Boost
	}
	return priority
}

// StarvationAfter is how long work waits before it is boosted.
func (p Params) StarvationAfter() time.Duration {
	return time.Duration(p.Starvation.BoostAfterSeconds) * time.Second
}

// EphemeralProvider says whether a provider's machines can vanish.
func (p Params) EphemeralProvider(provider string) bool {
	return slices.Contains(p.Providers.Ephemeral, provider)
}

// Cost is a provider's price per GPU hour; unknown providers count as
// expensive so known-cheap ones win.
func (p Params) Cost(provider string) float64 {
	if c, ok := p.Providers.CostPerGPUHour[provider]; ok {
		return c
	}
	return 1000
}

// TierPreference is the GPU tiers a work kind's GPU units prefer, best
// first (none: any tier alike).
func (p Params) TierPreference(kind string) []int {
	return p.TierPreferences[kind]
}

// Preference is a work kind's provider preference (zero when none).
func (p Params) Preference(kind string) Preference {
	return p.Providers.Preferences[kind]
}
