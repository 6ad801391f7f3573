package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestBackwardMatchesFiniteDifferences checks every parameter's gradient of
// L = Σ c·out + ½Σ out² against central differences.
func TestBackwardMatchesFiniteDifferences(t *testing.T) {
	tests := []struct {
		name  string
		sizes []int
		n     int
	}{
		{"linear", []int{3, 2}, 4},
		{"one hidden", []int{4, 8, 2}, 5},
		{"two hidden", []int{3, 16, 16, 1}, 3},
		{"wide out", []int{2, 5, 7}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			m, err := NewMLP(tc.sizes...)
			if err != nil {
				t.Fatal(err)
			}
			p := make([]float64, m.NumParams())
			m.Init(p, rng, math.Sqrt2, 1)
			for i := range p { // non-zero biases too
				p[i] += 0.1 * rng.NormFloat64()
			}
			x := make([]float64, tc.n*m.In())
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			c := make([]float64, tc.n*m.Out())
			for i := range c {
				c[i] = rng.NormFloat64()
			}
			ws := m.NewWorkspace(tc.n)
			loss := func() float64 {
				out := m.Forward(p, ws, x, tc.n)
				var l float64
				for i, o := range out {
					l += c[i]*o + 0.5*o*o
				}
				return l
			}
			out := m.Forward(p, ws, x, tc.n)
			dOut := make([]float64, len(out))
			for i, o := range out {
				dOut[i] = c[i] + o
			}
			g := make([]float64, len(p))
			m.Backward(p, g, ws, dOut, tc.n)
			const h = 1e-6
			for i := range p {
				orig := p[i]
				p[i] = orig + h
				lp := loss()
				p[i] = orig - h
				lm := loss()
				p[i] = orig
				fd := (lp - lm) / (2 * h)
				if math.Abs(fd-g[i]) > 1e-6*math.Max(1, math.Abs(fd)) {
					t.Fatalf("param %d: backprop %.10g, finite difference %.10g", i, g[i], fd)
				}
			}
		})
	}
}

func TestInitIsOrthogonal(t *testing.T) {
	for _, shape := range [][2]int{{8, 8}, {4, 16}, {16, 4}} {
		rows, cols := shape[0], shape[1]
		w := make([]float64, rows*cols)
		orthogonal(w, rows, cols, 2, rand.New(rand.NewPCG(3, 4)))
		// W Wᵀ = 4I when rows ≤ cols, Wᵀ W = 4I otherwise.
		k := min(rows, cols)
		for i := 0; i < k; i++ {
			for j := 0; j < k; j++ {
				var s float64
				if rows <= cols {
					s = Dot(w[i*cols:(i+1)*cols], w[j*cols:(j+1)*cols])
				} else {
					for r := 0; r < rows; r++ {
						s += w[r*cols+i] * w[r*cols+j]
					}
				}
				want := 0.0
				if i == j {
					want = 4
				}
				if math.Abs(s-want) > 1e-9 {
					t.Fatalf("%dx%d: gram[%d][%d] = %v, want %v", rows, cols, i, j, s, want)
				}
			}
		}
	}
}

func TestAdamFirstStepsMatchHandComputation(t *testing.T) {
	// Step 1: m̂ = g, v̂ = g², so Δ = -lr·g/(|g|+eps).
	// Step 2 with g2: m = 0.09·g1·... computed explicitly below.
	a := NewAdam(2, 1e-8)
	p := []float64{1, -2}
	g1 := []float64{0.5, -4}
	a.Update(p, g1, 0.1)
	want := []float64{1 - 0.1*0.5/(0.5+1e-8), -2 + 0.1*4/(4+1e-8)}
	for i := range p {
		if math.Abs(p[i]-want[i]) > 1e-15 {
			t.Fatalf("step 1: p[%d] = %.17g, want %.17g", i, p[i], want[i])
		}
	}
	g2 := []float64{-1, 2}
	a.Update(p, g2, 0.1)
	for i := range p {
		m := 0.9*0.1*g1[i] + 0.1*g2[i]
		v := 0.999*0.001*g1[i]*g1[i] + 0.001*g2[i]*g2[i]
		mhat, vhat := m/(1-0.81), v/(1-0.999*0.999)
		want[i] -= 0.1 * mhat / (math.Sqrt(vhat) + 1e-8)
		if math.Abs(p[i]-want[i]) > 1e-12 {
			t.Fatalf("step 2: p[%d] = %.17g, want %.17g", i, p[i], want[i])
		}
	}
	if a.Step != 2 {
		t.Fatalf("Step = %d", a.Step)
	}
}

func TestClipGradNorm(t *testing.T) {
	tests := []struct {
		g        []float64
		max      float64
		wantNorm float64
		wantG    []float64
	}{
		{[]float64{3, 4}, 1, 5, []float64{0.6, 0.8}},
		{[]float64{3, 4}, 10, 5, []float64{3, 4}},
		{[]float64{3, 4}, 0, 5, []float64{3, 4}},
	}
	for _, tc := range tests {
		norm := ClipGradNorm(tc.g, tc.max)
		if norm != tc.wantNorm {
			t.Errorf("norm %v, want %v", norm, tc.wantNorm)
		}
		for i := range tc.g {
			if math.Abs(tc.g[i]-tc.wantG[i]) > 1e-6 {
				t.Errorf("max %v: g = %v, want %v", tc.max, tc.g, tc.wantG)
			}
		}
	}
}

func TestNewMLPRejects(t *testing.T) {
	for _, s := range [][]int{nil, {4}, {4, 0, 2}} {
		if _, err := NewMLP(s...); err == nil {
			t.Errorf("NewMLP(%v) accepted", s)
		}
	}
}

// BenchmarkForwardBackward times one 64-sample minibatch through a
// 4-64-64-2 network and back.
func BenchmarkForwardBackward(b *testing.B) {
	const n = 64
	m, _ := NewMLP(4, 64, 64, 2)
	rng := rand.New(rand.NewPCG(1, 1))
	p := make([]float64, m.NumParams())
	g := make([]float64, m.NumParams())
	m.Init(p, rng, math.Sqrt2, 0.01)
	x := make([]float64, n*4)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	d := make([]float64, n*2)
	for i := range d {
		d[i] = rng.NormFloat64()
	}
	ws := m.NewWorkspace(n)
	b.ResetTimer()
	for range b.N {
		m.Forward(p, ws, x, n)
		m.Backward(p, g, ws, d, n)
	}
	b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds(), "samples/s")
}

func BenchmarkForward(b *testing.B) {
	const n = 64
	m, _ := NewMLP(4, 64, 64, 2)
	rng := rand.New(rand.NewPCG(1, 1))
	p := make([]float64, m.NumParams())
	m.Init(p, rng, math.Sqrt2, 0.01)
	x := make([]float64, n*4)
	ws := m.NewWorkspace(n)
	b.ResetTimer()
	for range b.N {
		m.Forward(p, ws, x, n)
	}
	b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds(), "samples/s")
}
