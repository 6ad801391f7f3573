package nn

import "math"

// Adam is the Adam optimizer (Kingma & Ba) over one flat parameter vector,
// with the bias correction folded into the step size as PyTorch does. Its
// moments and step count are exported so a checkpoint can hold them.
type Adam struct {
	Beta1, Beta2, Eps float64
	M, V              []float64
	Step              int64
}

// NewAdam returns an optimizer for n parameters with PyTorch's betas and
// the given epsilon (PPO implementations commonly use 1e-5).
func NewAdam(n int, eps float64) *Adam {
	return &Adam{Beta1: 0.9, Beta2: 0.999, Eps: eps, M: make([]float64, n), V: make([]float64, n)}
}

// Update applies one step with learning rate lr to p given gradient g.
func (a *Adam) Update(p, g []float64, lr float64) {
	a.Step++
	b1, b2 := a.Beta1, a.Beta2
	bc1 := 1 - math.Pow(b1, float64(a.Step))
	bc2 := 1 - math.Pow(b2, float64(a.Step))
	stepSize := lr / bc1
	sqrtBC2 := math.Sqrt(bc2)
	m, v := a.M[:len(p)], a.V[:len(p)]
	g = g[:len(p)]
	for i, gi := range g {
		m[i] = b1*m[i] + (1-b1)*gi
		v[i] = b2*v[i] + (1-b2)*gi*gi
		p[i] -= stepSize * m[i] / (math.Sqrt(v[i])/sqrtBC2 + a.Eps)
	}
}

// ClipGradNorm scales g so its L2 norm is at most maxNorm and returns the
// norm before clipping (maxNorm ≤ 0 disables clipping).
func ClipGradNorm(g []float64, maxNorm float64) float64 {
	norm := math.Sqrt(Dot(g, g))
	if maxNorm > 0 && norm > maxNorm {
		s := maxNorm / (norm + 1e-6)
		for i := range g {
			g[i] *= s
		}
	}
	return norm
}
