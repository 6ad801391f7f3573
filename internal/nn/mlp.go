// Package nn is the small dense-network kit the PPO learner needs: a tanh MLP
// whose parameters live in a caller-owned flat []float64 (so several
// networks share one optimizer vector and one checkpoint section), batched
// forward and hand-written backward passes, orthogonal initialisation and
// Adam. Everything is single-goroutine and allocation-free after setup;
// callers parallelise by giving each goroutine its own Workspace.
package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// MLP is a layout: layer sizes and where each layer's weights and biases sit
// in a parameter slice. Hidden layers use tanh; the output is linear.
// Layer l's weights are a row-major (out × in) matrix followed by out biases.
type MLP struct {
	sizes []int
	woff  []int // offset of layer l's weights
	boff  []int // offset of layer l's biases
	n     int
}

// NewMLP lays out a network with the given sizes: input, hidden..., output.
func NewMLP(sizes ...int) (MLP, error) {
	if len(sizes) < 2 {
		return MLP{}, fmt.Errorf("mlp: need input and output sizes, got %v", sizes)
	}
	for _, s := range sizes {
		if s < 1 {
			return MLP{}, fmt.Errorf("mlp: layer size %d in %v", s, sizes)
		}
	}
	m := MLP{sizes: append([]int(nil), sizes...)}
	for l := 0; l+1 < len(sizes); l++ {
		m.woff = append(m.woff, m.n)
		m.n += sizes[l] * sizes[l+1]
		m.boff = append(m.boff, m.n)
		m.n += sizes[l+1]
	}
	return m, nil
}

// NumParams is the length of the parameter slice the network reads.
func (m MLP) NumParams() int { return m.n }

// In and Out are the input and output widths.
func (m MLP) In() int  { return m.sizes[0] }
func (m MLP) Out() int { return m.sizes[len(m.sizes)-1] }

// Sizes returns a copy of the layer sizes.
func (m MLP) Sizes() []int { return append([]int(nil), m.sizes...) }

// Init sets p to orthogonal weights scaled by hiddenGain (outGain for the
// last layer) and zero biases: the initialisation PPO implementations use
// (gain √2 for tanh hidden layers, 0.01 for a policy head, 1 for a value
// head), which matters for early exploration.
func (m MLP) Init(p []float64, rng *rand.Rand, hiddenGain, outGain float64) {
	p = p[:m.n]
	for l := range m.woff {
		in, out := m.sizes[l], m.sizes[l+1]
		gain := hiddenGain
		if l == len(m.woff)-1 {
			gain = outGain
		}
		orthogonal(p[m.woff[l]:m.woff[l]+out*in], out, in, gain, rng)
		clear(p[m.boff[l] : m.boff[l]+out])
	}
}

// orthogonal fills w (rows × cols, row-major) with a gain-scaled matrix
// whose rows (or columns, whichever are fewer) are orthonormal: Gram-Schmidt
// on a Gaussian matrix, with the sign fix that makes the result uniformly
// distributed (as torch.nn.init.orthogonal_ does via QR).
func orthogonal(w []float64, rows, cols int, gain float64, rng *rand.Rand) {
	// Orthonormalise k vectors of length d; they become the rows when
	// rows ≤ cols, else the columns.
	k, d := rows, cols
	if rows > cols {
		k, d = cols, rows
	}
	v := make([]float64, k*d)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	for i := 0; i < k; i++ {
		vi := v[i*d : (i+1)*d]
		for j := 0; j < i; j++ {
			vj := v[j*d : (j+1)*d]
			Axpy(-Dot(vi, vj), vj, vi)
		}
		norm := math.Sqrt(Dot(vi, vi))
		for t := range vi {
			vi[t] /= norm
		}
	}
	for i := 0; i < k; i++ {
		for t := 0; t < d; t++ {
			x := gain * v[i*d+t]
			if rows <= cols {
				w[i*cols+t] = x
			} else {
				w[t*cols+i] = x
			}
		}
	}
}

// Workspace holds one goroutine's activations and deltas for up to maxN
// samples.
type Workspace struct {
	maxN   int
	acts   [][]float64 // acts[l]: layer l's output (acts[0] is the input)
	deltas [][]float64 // deltas[l]: dLoss/d(pre-activation) of layer l's output
	// Transposes for Backward: inputs, deltas and weights of one layer.
	xT, dT, wT []float64
}

// NewWorkspace sizes a workspace for batches of up to maxN samples.
func (m MLP) NewWorkspace(maxN int) *Workspace {
	ws := &Workspace{maxN: maxN}
	widest, weights := 0, 0
	for l, s := range m.sizes {
		ws.acts = append(ws.acts, make([]float64, maxN*s))
		ws.deltas = append(ws.deltas, make([]float64, maxN*s))
		widest = max(widest, s)
		if l > 0 {
			weights = max(weights, s*m.sizes[l-1])
		}
	}
	ws.xT = make([]float64, maxN*widest)
	ws.dT = make([]float64, maxN*widest)
	ws.wT = make([]float64, weights)
	return ws
}

// Forward runs n samples (x is n × In) and returns the n × Out outputs, a
// view into ws valid until its next use. ws keeps the activations for
// Backward.
func (m MLP) Forward(p []float64, ws *Workspace, x []float64, n int) []float64 {
	if n > ws.maxN {
		panic(fmt.Sprintf("mlp: batch %d exceeds workspace %d", n, ws.maxN))
	}
	copy(ws.acts[0], x[:n*m.sizes[0]])
	last := len(m.woff) - 1
	for l := range m.woff {
		in, out := m.sizes[l], m.sizes[l+1]
		w := p[m.woff[l] : m.woff[l]+out*in]
		b := p[m.boff[l] : m.boff[l]+out]
		src, dst := ws.acts[l], ws.acts[l+1]
		for s := 0; s < n; s++ {
			xs := src[s*in : (s+1)*in]
			ys := dst[s*out : (s+1)*out]
			for j := range ys {
				ys[j] = b[j] + Dot(w[j*in:(j+1)*in], xs)
			}
			if l != last {
				for j, y := range ys {
					ys[j] = math.Tanh(y)
				}
			}
		}
	}
	return ws.acts[len(m.sizes)-1][:n*m.Out()]
}

// Backward takes dOut = dLoss/dOutput (n × Out) for the batch of the last
// Forward on ws and adds dLoss/dParams into g (len NumParams).
//
// Every product is a contiguous dot: the weight gradient dots the
// transposed deltas with the transposed inputs over the batch, and the
// input deltas dot each sample's deltas with the transposed weights. (An
// axpy per sample and unit was 3× slower: it stores on every element.)
func (m MLP) Backward(p, g []float64, ws *Workspace, dOut []float64, n int) {
	last := len(m.woff) - 1
	copy(ws.deltas[last+1], dOut[:n*m.Out()])
	for l := last; l >= 0; l-- {
		in, out := m.sizes[l], m.sizes[l+1]
		w := p[m.woff[l] : m.woff[l]+out*in]
		gw := g[m.woff[l] : m.woff[l]+out*in]
		gb := g[m.boff[l] : m.boff[l]+out]
		src, delta, prev := ws.acts[l], ws.deltas[l+1], ws.deltas[l]
		xT := transpose(ws.xT, src, n, in)
		dT := transpose(ws.dT, delta, n, out)
		for j := 0; j < out; j++ {
			dj := dT[j*n : (j+1)*n]
			var sb float64
			for _, d := range dj {
				sb += d
			}
			gb[j] += sb
			gwj := gw[j*in : (j+1)*in]
			for i := range gwj {
				gwj[i] += Dot(dj, xT[i*n:(i+1)*n])
			}
		}
		if l == 0 {
			continue // no gradient needed for the input
		}
		wT := transpose(ws.wT, w, out, in)
		for s := 0; s < n; s++ {
			ds := delta[s*out : (s+1)*out]
			ys := src[s*in : (s+1)*in] // tanh outputs of layer l-1
			ps := prev[s*in : (s+1)*in]
			for i, y := range ys {
				// tanh' = 1 - y².
				ps[i] = Dot(ds, wT[i*out:(i+1)*out]) * (1 - y*y)
			}
		}
	}
}

// transpose writes the (cols × rows) transpose of the row-major a
// (rows × cols) into dst and returns it.
func transpose(dst, a []float64, rows, cols int) []float64 {
	dst = dst[:rows*cols]
	for r := 0; r < rows; r++ {
		ar := a[r*cols : (r+1)*cols]
		for c, v := range ar {
			dst[c*rows+r] = v
		}
	}
	return dst
}

// Dot is Σ a[i]·b[i] over len(a) (b at least as long), with four
// accumulators; reslicing as it goes lets the compiler drop bounds checks.
func Dot(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	for len(a) >= 4 && len(b) >= 4 {
		s0 += a[0] * b[0]
		s1 += a[1] * b[1]
		s2 += a[2] * b[2]
		s3 += a[3] * b[3]
		a, b = a[4:], b[4:]
	}
	for i := range a {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Axpy does y[i] += alpha·x[i] over len(x) (y at least as long).
func Axpy(alpha float64, x, y []float64) {
	y = y[:len(x)]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		y[i] += alpha * x[i]
		y[i+1] += alpha * x[i+1]
		y[i+2] += alpha * x[i+2]
		y[i+3] += alpha * x[i+3]
	}
	for ; i < len(x); i++ {
		y[i] += alpha * x[i]
	}
}
