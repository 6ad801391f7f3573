package pendulum

import (
	"math"
	"testing"
)

// closeTo allows a few ulps: expected values come from evaluating
// Gymnasium's equations with CPython floats (libm sin may differ from Go's
// math in the last bit).
func closeTo(got, want float64) bool {
	return math.Abs(got-want) <= 1e-12*math.Max(1, math.Abs(want))
}

func TestAngleNormalizeIsPythonModulo(t *testing.T) {
	tests := []struct{ in, want float64 }{
		{-7, -0.7168146928204138},
		{4, -2.2831853071795862},
		{3.5, -2.7831853071795862},
		{-3.2, 3.083185307179586},
		{10, -2.5663706143591725},
		{math.Pi, -math.Pi},
		{-math.Pi, -math.Pi},
		{0, 0},
	}
	for _, tc := range tests {
		if got := AngleNormalize(tc.in); !closeTo(got, tc.want) {
			t.Errorf("AngleNormalize(%v) = %.17g, want %.17g", tc.in, got, tc.want)
		}
	}
}

func TestKnownTrajectories(t *testing.T) {
	type step struct {
		u              float32
		th, thDot, rew float64
	}
	tests := []struct {
		name      string
		th, thDot float64
		steps     []step
	}{
		// Hanging down at rest with no torque: cost is pi^2 and the state
		// moves only by sin(pi)'s rounding error.
		{"hanging at rest", math.Pi, 0, []step{{0, 3.141592653589793, 9.184850993605151e-17, -9.869604401089358}}},
		// -3.5 is clipped to -2, so its cost term is 0.001*4.
		{"clipped torques", 1, -0.5, []step{
			{2, 1.021555161930296, 0.4311032386059225, -1.029},
			{-3.5, 1.060094857985617, 0.7707939211064221, -1.0661599491000848},
			{0.25, 1.1332246234849788, 1.4625953099872342, -1.183275934809007},
			{1, 1.247821262813369, 2.291932786567805, -1.4991165513523366},
			{-1, 1.390478978253425, 2.8531543088011215, -2.0833534937435982},
		}},
		// Speed saturates at 8 rad/s; the angle is normalised in the cost.
		{"speed limit", 3, 7.9, []step{
			{2, 3.4, 8, -15.245},
			{2, 3.8, 8, -14.716757515536242},
			{2, 4.192055329089648, 7.84110658179296, -12.570209269792576},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e Env
			e.SetState(tc.th, tc.thDot)
			var obs [3]float32
			for k, st := range tc.steps {
				r, term, trunc := e.Step(st.u, obs[:])
				th, thDot := e.State()
				if !closeTo(th, st.th) || !closeTo(thDot, st.thDot) {
					t.Fatalf("step %d: state (%.17g, %.17g), want (%.17g, %.17g)", k+1, th, thDot, st.th, st.thDot)
				}
				if r != float32(st.rew) || term || trunc {
					t.Fatalf("step %d: reward %v term %v trunc %v, want %v false false", k+1, r, term, trunc, float32(st.rew))
				}
				want := [3]float32{float32(math.Cos(th)), float32(math.Sin(th)), float32(thDot)}
				if obs != want {
					t.Fatalf("step %d: obs %v, want %v", k+1, obs, want)
				}
			}
		})
	}
}

func TestTruncatesOnStep200(t *testing.T) {
	e := New(5)
	var obs [3]float32
	for k := 1; k <= MaxEpisodeSteps; k++ {
		_, term, trunc := e.Step(float32(k%5)-2, obs[:])
		if term || trunc != (k == MaxEpisodeSteps) {
			t.Fatalf("step %d: terminated %v truncated %v", k, term, trunc)
		}
	}
}

func TestResetIsSeededAndBounded(t *testing.T) {
	var a, b [3]float32
	ea, eb, ec := New(7), New(7), New(8)
	differ := false
	for k := 0; k < 1000; k++ {
		ea.Reset(a[:])
		eb.Reset(b[:])
		ec.Reset(b[:])
		th, thDot := ea.State()
		eth, _ := eb.State()
		if th != eth {
			t.Fatalf("reset %d: same seed gave different states", k)
		}
		cth, _ := ec.State()
		differ = differ || cth != th
		if th < -math.Pi || th >= math.Pi || thDot < -1 || thDot >= 1 {
			t.Fatalf("reset %d: state (%v, %v) out of bounds", k, th, thDot)
		}
	}
	if !differ {
		t.Fatal("seeds 7 and 8 gave identical resets")
	}
}

func TestMarshalRoundTripContinuesIdentically(t *testing.T) {
	e := New(11)
	var obs, obs2 [3]float32
	for k := 0; k < 50; k++ {
		e.Step(1, obs[:])
	}
	snap, err := e.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var f Env
	if err := f.UnmarshalBinary(snap); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 1000; k++ {
		u := float32(k%9)/2 - 2
		r1, _, u1 := e.Step(u, obs[:])
		r2, _, u2 := f.Step(u, obs2[:])
		if obs != obs2 || r1 != r2 || u1 != u2 {
			t.Fatalf("step %d diverged", k)
		}
		if u1 {
			e.Reset(obs[:])
			f.Reset(obs2[:])
		}
	}
	for _, bad := range [][]byte{nil, snap[:10], append([]byte{9}, snap[1:]...), snap[:len(snap)-1]} {
		if err := f.UnmarshalBinary(bad); err == nil {
			t.Errorf("UnmarshalBinary(%d bytes) accepted a bad snapshot", len(bad))
		}
	}
}

func TestStepDoesNotAllocate(t *testing.T) {
	e := New(1)
	var obs [3]float32
	if n := testing.AllocsPerRun(1000, func() {
		if _, _, trunc := e.Step(0.5, obs[:]); trunc {
			e.Reset(obs[:])
		}
	}); n != 0 {
		t.Fatalf("Step allocates %v times per call", n)
	}
}
