package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/trainyard/trainyard/internal/nn"
)

// HParams are the training settings; zero fields take the defaults.
type HParams struct {
	Epochs      int     // passes over the examples; default 4
	BatchSize   int     // default 64
	LR          float64 // Adam step size; default 1e-3
	ValueWeight float64 // weight of the value loss; default 1
	WeightDecay float64 // L2 penalty; default 1e-4
	MaxGradNorm float64 // gradient clipping; default 1
	Seed        uint64  // shuffling order
}

func (h HParams) withDefaults() HParams {
	if h.Epochs <= 0 {
		h.Epochs = 4
	}
	if h.BatchSize <= 0 {
		h.BatchSize = 64
	}
	if h.LR <= 0 {
		h.LR = 1e-3
	}
	if h.ValueWeight <= 0 {
		h.ValueWeight = 1
	}
	if h.WeightDecay < 0 {
		h.WeightDecay = 0
	} else if h.WeightDecay == 0 {
		h.WeightDecay = 1e-4
	}
	if h.MaxGradNorm <= 0 {
		h.MaxGradNorm = 1
	}
	return h
}

// Stats report a training call: losses are means over its last epoch.
type Stats struct {
	Examples   int     `json:"examples"`
	Steps      int     `json:"steps"`
	PolicyLoss float64 `json:"policy_loss"` // cross-entropy to the visit distribution
	ValueLoss  float64 `json:"value_loss"`  // mean squared error to the outcomes
}

// Train fits m to the examples with Adam (fresh moments each call, so a
// generation's model continues from its parent's weights): softmax
// cross-entropy of the policy logits to the visit distribution (over all
// actions: targets put no mass on illegal ones, so the net learns to avoid
// them; Evaluate masks them anyway) plus ValueWeight × the squared error
// of the tanh value heads to the outcomes. Deterministic for a given
// model, examples and HParams.
func Train(m *Model, ex Examples, hp HParams) (Stats, error) {
	hp = hp.withDefaults()
	s := m.shape
	n := ex.Len()
	st := Stats{Examples: n}
	if n == 0 {
		return st, fmt.Errorf("model %s: train: no examples", m.Name)
	}
	if len(ex.States) != n || len(ex.Policies) != n || (ex.Outcomes != nil && len(ex.Outcomes) != n) {
		return st, fmt.Errorf("model %s: train: %d states, %d policies, %d outcomes for %d values", m.Name, len(ex.States), len(ex.Policies), len(ex.Outcomes), n)
	}
	for i := 0; i < n; i++ {
		if len(ex.States[i]) != s.ObsDim || len(ex.Policies[i]) != s.Actions || (ex.Outcomes != nil && len(ex.Outcomes[i]) != s.Players) {
			return st, fmt.Errorf("model %s: train: example %d has state %d, policy %d values; the net takes %d and %d", m.Name, i, len(ex.States[i]), len(ex.Policies[i]), s.ObsDim, s.Actions)
		}
	}
	bs := min(hp.BatchSize, n)
	ws := m.mlp.NewWorkspace(bs)
	adam := nn.NewAdam(len(m.params), 1e-8)
	grad := make([]float64, len(m.params))
	x := make([]float64, bs*s.ObsDim)
	out := s.Actions + s.Players
	dOut := make([]float64, bs*out)
	p := make([]float32, s.Actions)
	target := make([]float32, s.Players)
	trained := make([]bool, s.Players)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	rng := rand.New(rand.NewPCG(hp.Seed, 0x7a1e))
	for epoch := 0; epoch < hp.Epochs; epoch++ {
		rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
		var pl, vl float64
		for start := 0; start+bs <= n; start += bs {
			batch := order[start : start+bs]
			for b, i := range batch {
				for j, v := range ex.States[i] {
					x[b*s.ObsDim+j] = float64(v)
				}
			}
			y := m.mlp.Forward(m.params, ws, x, bs)
			inv := 1 / float64(bs)
			for b, i := range batch {
				yb, db := y[b*out:(b+1)*out], dOut[b*out:(b+1)*out]
				softmax(yb[:s.Actions], nil, p)
				pi := ex.Policies[i]
				tot := 0.0
				for _, v := range pi {
					tot += float64(v)
				}
				if tot <= 0 {
					tot = 1
				}
				for a := range p {
					t := float64(pi[a]) / tot
					db[a] = (float64(p[a]) - t) * inv
					if t > 0 {
						pl -= t * math.Log(max(float64(p[a]), 1e-12))
					}
				}
				valueTarget(ex, i, s.Players, target, trained)
				for k := 0; k < s.Players; k++ {
					db[s.Actions+k] = 0
					if !trained[k] {
						continue
					}
					v := math.Tanh(yb[s.Actions+k])
					d := v - float64(target[k])
					vl += d * d / float64(s.Players)
					db[s.Actions+k] = hp.ValueWeight * 2 * d * (1 - v*v) * inv / float64(s.Players)
				}
			}
			clear(grad)
			m.mlp.Backward(m.params, grad, ws, dOut, bs)
			for j, w := range m.params {
				grad[j] += hp.WeightDecay * w
			}
			nn.ClipGradNorm(grad, hp.MaxGradNorm)
			adam.Update(m.params, grad, hp.LR)
			st.Steps++
			m.steps++
		}
		batches := float64(n / bs * bs)
		st.PolicyLoss, st.ValueLoss = pl/batches, vl/batches
	}
	for j, w := range m.params {
		if math.IsNaN(w) || math.IsInf(w, 0) {
			return st, fmt.Errorf("model %s: train: weight %d is %v", m.Name, j, w)
		}
	}
	return st, nil
}

// valueTarget writes example i's per-seat value targets (relative to the
// mover) and which seats have one. Without Outcomes the other seats are
// inferred from the mover's value: a win means everyone else lost (-v); a
// loss means one of the n-1 others won, so each expects
// (1 - (n-2))/(n-1) = v·(n-3)/(n-1) (the other seat's +1 in two-player
// games).
func valueTarget(ex Examples, i, players int, target []float32, trained []bool) {
	if ex.Outcomes != nil {
		copy(target, ex.Outcomes[i])
		for k := range trained {
			trained[k] = true
		}
		return
	}
	v := ex.Values[i]
	other := -v
	if v < 0 {
		other = v * float32(players-3) / float32(players-1)
	}
	target[0], trained[0] = v, true
	for k := 1; k < players; k++ {
		target[k], trained[k] = other, true
	}
}
