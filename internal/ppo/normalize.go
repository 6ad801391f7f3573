package ppo

import "math"

// runningMeanStd tracks per-dimension mean and variance over batches with
// Chan et al.'s parallel update (as SB3's RunningMeanStd, starting from a
// tiny pseudo-count so the first batch dominates).
type runningMeanStd struct {
	Mean  []float64 `json:"mean"`
	Var   []float64 `json:"var"`
	Count float64   `json:"count"`
}

func newRunningMeanStd(dim int) runningMeanStd {
	r := runningMeanStd{Mean: make([]float64, dim), Var: make([]float64, dim), Count: 1e-4}
	for i := range r.Var {
		r.Var[i] = 1
	}
	return r
}

// update folds in n samples of x (row-major n × dim); scratch holds 2·dim
// values.
func (r *runningMeanStd) update(x []float32, n int, scratch []float64) {
	dim := len(r.Mean)
	bMean, bVar := scratch[:dim], scratch[dim:2*dim]
	clear(bMean)
	clear(bVar)
	for s := 0; s < n; s++ {
		for d, v := range x[s*dim : (s+1)*dim] {
			bMean[d] += float64(v)
		}
	}
	for d := range bMean {
		bMean[d] /= float64(n)
	}
	for s := 0; s < n; s++ {
		for d, v := range x[s*dim : (s+1)*dim] {
			e := float64(v) - bMean[d]
			bVar[d] += e * e
		}
	}
	for d := range bVar {
		bVar[d] /= float64(n)
	}
	r.merge(bMean, bVar, float64(n))
}

// updateF64 is update for float64 samples.
func (r *runningMeanStd) updateF64(x []float64, n int, scratch []float64) {
	dim := len(r.Mean)
	bMean, bVar := scratch[:dim], scratch[dim:2*dim]
	clear(bMean)
	clear(bVar)
	for i, v := range x[:n*dim] {
		bMean[i%dim] += v
	}
	for d := range bMean {
		bMean[d] /= float64(n)
	}
	for i, v := range x[:n*dim] {
		e := v - bMean[i%dim]
		bVar[i%dim] += e * e
	}
	for d := range bVar {
		bVar[d] /= float64(n)
	}
	r.merge(bMean, bVar, float64(n))
}

func (r *runningMeanStd) merge(bMean, bVar []float64, bCount float64) {
	tot := r.Count + bCount
	for d := range r.Mean {
		delta := bMean[d] - r.Mean[d]
		m2 := r.Var[d]*r.Count + bVar[d]*bCount + delta*delta*r.Count*bCount/tot
		r.Mean[d] += delta * bCount / tot
		r.Var[d] = m2 / tot
	}
	r.Count = tot
}

// normalize writes clip((x-mean)/sqrt(var+1e-8)) for n rows into dst;
// clip ≤ 0 means no normalisation (plain conversion).
func (r *runningMeanStd) normalize(dst []float64, x []float32, n int, clip float64) {
	dim := len(r.Mean)
	if clip <= 0 {
		for i, v := range x[:n*dim] {
			dst[i] = float64(v)
		}
		return
	}
	for s := 0; s < n; s++ {
		row := dst[s*dim : (s+1)*dim]
		for d, v := range x[s*dim : (s+1)*dim] {
			z := (float64(v) - r.Mean[d]) / math.Sqrt(r.Var[d]+1e-8)
			row[d] = min(max(z, -clip), clip)
		}
	}
}
