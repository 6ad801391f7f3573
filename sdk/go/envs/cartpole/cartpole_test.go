package cartpole

import (
	"math"
	"testing"
)

// closeTo allows a few ulps: expected values come from evaluating
// Gymnasium's equations with CPython floats, whose libm cos/sin may differ
// from Go's math in the last bit.
func closeTo(got, want float64) bool {
	return math.Abs(got-want) <= 1e-12*math.Max(1, math.Abs(want))
}

func TestThetaThresholdMatchesPython(t *testing.T) {
	// repr(12 * 2 * math.pi / 360) in CPython.
	if got := ThetaThreshold(); got != 0.20943951023931953 {
		t.Fatalf("ThetaThreshold = %.17g, want 0.20943951023931953", got)
	}
}

func TestFirstStepFromRestIsExact(t *testing.T) {
	// From rest with force ±10: temp = ±100/11,
	// thetaacc = ∓(100/11)/(0.5*(4/3 - 1/11)) = ∓600/41,
	// xacc = ±(100/11 + 0.05*(600/41)/1.1) = ±4400/451.
	for _, tc := range []struct {
		action int
		sign   float64
	}{{1, 1}, {0, -1}} {
		var e Env
		e.SetState([4]float64{})
		var obs [4]float32
		r, term, trunc := e.Step(tc.action, obs[:])
		s := e.State()
		want := [4]float64{0, tc.sign * 0.02 * 4400 / 451, 0, -tc.sign * 0.02 * 600 / 41}
		for i := range s {
			if !closeTo(s[i], want[i]) {
				t.Errorf("action %d: state[%d] = %.17g, want %.17g", tc.action, i, s[i], want[i])
			}
			if obs[i] != float32(s[i]) {
				t.Errorf("action %d: obs[%d] = %v, want float32 of state %v", tc.action, i, obs[i], s[i])
			}
		}
		if r != 1 || term || trunc {
			t.Errorf("action %d: reward/term/trunc = %v/%v/%v, want 1/false/false", tc.action, r, term, trunc)
		}
	}
}

func TestKnownTrajectories(t *testing.T) {
	type step struct {
		action int
		state  [4]float64
		term   bool
	}
	tests := []struct {
		name  string
		start [4]float64
		steps []step
	}{
		{"mixed actions", [4]float64{0.01, -0.02, 0.03, -0.04}, []step{
			{1, [4]float64{0.009600000000000001, 0.17467919574755525, 0.0292, -0.3230687179600081}, false},
			{0, [4]float64{0.013093583914951107, -0.020846120233304483, 0.02273862564079984, -0.021322189539218106}, false},
			{0, [4]float64{0.012676661510285018, -0.21628666139669434, 0.022312181850015475, 0.2784474166567325}, false},
			{1, [4]float64{0.00835092828235113, -0.021490000379440544, 0.027881130183150124, -0.007115608467152645}, false},
			{1, [4]float64{0.00792112827476232, 0.17322123092863484, 0.027738818013807072, -0.29087295230897875}, false},
			{1, [4]float64{0.011385552893335017, 0.36793690049741734, 0.021921358967627497, -0.5746799303435653}, false},
			{0, [4]float64{0.018744290903283365, 0.17251459847646505, 0.01042776036075619, -0.27517254317071566}, false},
			{1, [4]float64{0.022194582872812667, 0.36748623028388583, 0.004924309497341877, -0.5645483843942637}, false},
			{0, [4]float64{0.029544307478490385, 0.17229553589163107, -0.006366658190543397, -0.27031815151610944}, false},
			{0, [4]float64{0.03299021819632301, -0.022734986035086113, -0.011773021220865586, 0.020349917456688682}, false},
		}},
		{"cart leaves the track", [4]float64{2.39, 1, 0, 0}, []step{
			{1, [4]float64{2.41, 1.1951219512195121, 0, -0.2926829268292683}, true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e Env
			e.SetState(tc.start)
			var obs [4]float32
			for k, st := range tc.steps {
				r, term, _ := e.Step(st.action, obs[:])
				s := e.State()
				for i := range s {
					if !closeTo(s[i], st.state[i]) {
						t.Fatalf("step %d: state[%d] = %.17g, want %.17g", k+1, i, s[i], st.state[i])
					}
				}
				if term != st.term || r != 1 {
					t.Fatalf("step %d: terminated=%v reward=%v, want %v and 1", k+1, term, r, st.term)
				}
			}
		})
	}
}

func TestPushOneWayTerminatesAtStepNine(t *testing.T) {
	// Constant force from rest drops the pole past 12° on the 9th step;
	// the terminating step still pays 1 and later steps pay 0 (Gymnasium's
	// steps_beyond_terminated), and the state mirrors between directions.
	for _, tc := range []struct {
		action int
		final  [4]float64
	}{
		{1, [4]float64{0.14065097203306187, 1.7603811257683097, -0.21518604988500967, -2.777886494012814}},
		{0, [4]float64{-0.14065097203306187, -1.7603811257683097, 0.21518604988500967, 2.777886494012814}},
	} {
		var e Env
		e.SetState([4]float64{})
		var obs [4]float32
		for k := 1; k <= 9; k++ {
			r, term, _ := e.Step(tc.action, obs[:])
			if r != 1 || term != (k == 9) {
				t.Fatalf("action %d step %d: reward %v terminated %v", tc.action, k, r, term)
			}
		}
		for i, v := range e.State() {
			if !closeTo(v, tc.final[i]) {
				t.Errorf("action %d: final state[%d] = %.17g, want %.17g", tc.action, i, v, tc.final[i])
			}
		}
		if r, term, _ := e.Step(tc.action, obs[:]); r != 0 || !term {
			t.Errorf("action %d: step after termination: reward %v terminated %v, want 0 true", tc.action, r, term)
		}
	}
}

func TestTruncatesOnStep500(t *testing.T) {
	e := New(3)
	var obs [4]float32
	for k := 1; k <= MaxEpisodeSteps; k++ {
		e.SetState([4]float64{}) // keep it upright; only the clock matters
		_, term, trunc := e.Step(k%2, obs[:])
		if term || trunc != (k == MaxEpisodeSteps) {
			t.Fatalf("step %d: terminated %v truncated %v", k, term, trunc)
		}
	}
	e.Reset(obs[:])
	if e.Steps() != 0 {
		t.Fatalf("Steps after reset = %d", e.Steps())
	}
}

func TestResetIsSeededAndBounded(t *testing.T) {
	var a, b, c [4]float32
	ea, eb, ec := New(7), New(7), New(8)
	same := true
	for k := 0; k < 1000; k++ {
		ea.Reset(a[:])
		eb.Reset(b[:])
		ec.Reset(c[:])
		if a != b {
			t.Fatalf("reset %d: same seed gave %v and %v", k, a, b)
		}
		same = same && a == c
		for i, s := range ea.State() {
			if s < -0.05 || s >= 0.05 {
				t.Fatalf("reset %d: state[%d] = %v outside [-0.05, 0.05)", k, i, s)
			}
		}
	}
	if same {
		t.Fatal("seeds 7 and 8 gave identical resets")
	}
}

func TestMarshalRoundTripContinuesIdentically(t *testing.T) {
	e := New(11)
	var obs, obs2 [4]float32
	for k := 0; k < 37; k++ {
		e.Step(k%2, obs[:])
	}
	snap, err := e.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var f Env
	if err := f.UnmarshalBinary(snap); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 2000; k++ {
		a := (k * 7 / 3) % 2
		r1, t1, u1 := e.Step(a, obs[:])
		r2, t2, u2 := f.Step(a, obs2[:])
		if obs != obs2 || r1 != r2 || t1 != t2 || u1 != u2 {
			t.Fatalf("step %d diverged: %v vs %v", k, obs, obs2)
		}
		if t1 || u1 {
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
	var obs [4]float32
	if n := testing.AllocsPerRun(1000, func() {
		if _, term, trunc := e.Step(1, obs[:]); term || trunc {
			e.Reset(obs[:])
		}
	}); n != 0 {
		t.Fatalf("Step allocates %v times per call", n)
	}
}

func TestSpec(t *testing.T) {
	s := Spec()
	if s.Observation.Dim() != 4 || s.Action.N != 2 || s.MaxEpisodeSteps != 500 {
		t.Fatalf("spec %+v", s)
	}
	if s.Observation.High[2] != float32(2*ThetaThreshold()) || s.Observation.High[0] != 4.8 {
		t.Fatalf("observation high %v", s.Observation.High)
	}
}
