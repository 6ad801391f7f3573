package native

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/pendulum"
)

// single is one reference instance driven by hand, to check the batch's
// seeding and auto-reset against.
type single interface {
	Seed(uint64)
	Reset([]float32)
	step(a, obs []float32) (float32, bool, bool)
}

func newSingle(name string) single {
	if name == cartpole.Name {
		return &cartpoleInst{}
	}
	return &pendulumInst{}
}

// action is a deterministic, valid action for env i at step k.
func action(name string, i, k int) float32 {
	if name == cartpole.Name {
		return float32((i*31 + k*17 + k/3) % 2)
	}
	return float32((i+k)%9)/2 - 2
}

func TestBatchMatchesSingleInstancesWithAutoReset(t *testing.T) {
	const n, steps, seed = 5, 700, 42
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			v, err := New(name, n)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			od, ad := v.Spec().Observation.Dim(), v.Spec().Action.Dim()
			obs := make([]float32, n*od)
			fin := make([]float32, n*od)
			act := make([]float32, n*ad)
			rew := make([]float32, n)
			term, trunc := make([]bool, n), make([]bool, n)
			if err := v.Reset(seed, obs); err != nil {
				t.Fatal(err)
			}
			refs := make([]single, n)
			refObs := make([]float32, n*od)
			for i := range refs {
				refs[i] = newSingle(name)
				refs[i].Seed(seed + uint64(i)) // the documented derivation
				refs[i].Reset(refObs[i*od : (i+1)*od])
			}
			if !equal(obs, refObs) {
				t.Fatalf("reset obs %v, want %v", obs, refObs)
			}
			dones := 0
			for k := 0; k < steps; k++ {
				for i := 0; i < n; i++ {
					act[i*ad] = action(name, i, k)
				}
				for i := range fin {
					fin[i] = -99 // untouched unless an env finished
				}
				if err := v.Step(act, obs, rew, term, trunc, fin); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < n; i++ {
					o := refObs[i*od : (i+1)*od]
					r, te, tr := refs[i].step(act[i*ad:(i+1)*ad], o)
					if r != rew[i] || te != term[i] || tr != trunc[i] {
						t.Fatalf("step %d env %d: (%v,%v,%v), want (%v,%v,%v)", k, i, rew[i], term[i], trunc[i], r, te, tr)
					}
					if te || tr {
						dones++
						if !equal(fin[i*od:(i+1)*od], o) {
							t.Fatalf("step %d env %d: finalObs %v, want %v", k, i, fin[i*od:(i+1)*od], o)
						}
						refs[i].Reset(o)
					} else if fin[i*od] != -99 {
						t.Fatalf("step %d env %d: finalObs written for an unfinished env", k, i)
					}
				}
				if !equal(obs, refObs) {
					t.Fatalf("step %d: obs %v, want %v", k, obs, refObs)
				}
			}
			if dones == 0 {
				t.Fatal("no episode finished; the auto-reset path went untested")
			}
		})
	}
}

func TestStepRejectsBadInput(t *testing.T) {
	tests := []struct {
		name    string
		env     string
		act     []float32
		obsLen  int
		reset   bool
		wantErr string
	}{
		{"before reset", cartpole.Name, []float32{0, 1}, 8, false, "before reset"},
		{"action 2", cartpole.Name, []float32{0, 2}, 8, true, "env 1: invalid action"},
		{"fractional action", cartpole.Name, []float32{0.5, 1}, 8, true, "env 0: invalid action"},
		{"NaN torque", pendulum.Name, []float32{0, float32NaN()}, 6, true, "env 1: invalid action"},
		{"short obs", cartpole.Name, []float32{0, 1}, 7, true, "buffer sizes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := New(tc.env, 2)
			if err != nil {
				t.Fatal(err)
			}
			od := v.Spec().Observation.Dim()
			obs := make([]float32, 2*od)
			if tc.reset {
				if err := v.Reset(1, obs); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := v.(Snapshotter).Snapshot()
			o := make([]float32, tc.obsLen)
			err = v.Step(tc.act, o, make([]float32, 2), make([]bool, 2), make([]bool, 2), make([]float32, 2*od))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if after, _ := v.(Snapshotter).Snapshot(); string(before) != string(after) {
				t.Fatal("a rejected step changed the env state")
			}
		})
	}
}

func float32NaN() float32 {
	z := float32(0)
	return z / z
}

func TestNewRejects(t *testing.T) {
	if _, err := New("MountainCar-v0", 1); err == nil {
		t.Fatal("unknown env accepted")
	}
	if _, err := New(cartpole.Name, 0); err == nil {
		t.Fatal("n = 0 accepted")
	}
}

func TestSnapshotRestoresExactly(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			const n = 4
			a, _ := New(name, n)
			b, _ := New(name, n)
			od, ad := a.Spec().Observation.Dim(), a.Spec().Action.Dim()
			bufs := func() ([]float32, []float32, []float32, []bool, []bool, []float32) {
				return make([]float32, n*ad), make([]float32, n*od), make([]float32, n), make([]bool, n), make([]bool, n), make([]float32, n*od)
			}
			act, obsA, rewA, teA, trA, finA := bufs()
			_, obsB, rewB, teB, trB, finB := bufs()
			if err := a.Reset(9, obsA); err != nil {
				t.Fatal(err)
			}
			if err := b.Reset(12345, obsB); err != nil { // different state, overwritten below
				t.Fatal(err)
			}
			for k := 0; k < 300; k++ {
				for i := 0; i < n; i++ {
					act[i*ad] = action(name, i, k)
				}
				if err := a.Step(act, obsA, rewA, teA, trA, finA); err != nil {
					t.Fatal(err)
				}
			}
			snap, err := a.(Snapshotter).Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if err := b.(Snapshotter).RestoreSnapshot(snap); err != nil {
				t.Fatal(err)
			}
			for k := 0; k < 600; k++ {
				for i := 0; i < n; i++ {
					act[i*ad] = action(name, i, k+5)
				}
				if err := a.Step(act, obsA, rewA, teA, trA, finA); err != nil {
					t.Fatal(err)
				}
				if err := b.Step(act, obsB, rewB, teB, trB, finB); err != nil {
					t.Fatal(err)
				}
				if !equal(obsA, obsB) || !equal(rewA, rewB) {
					t.Fatalf("step %d diverged after restore", k)
				}
			}
		})
	}
}

func TestRestoreSnapshotRejects(t *testing.T) {
	cp, _ := New(cartpole.Name, 3)
	_ = cp.Reset(1, make([]float32, 12))
	snap, err := cp.(Snapshotter).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	pd, _ := New(pendulum.Name, 3)
	_ = pd.Reset(1, make([]float32, 9))
	pdSnap, _ := pd.(Snapshotter).Snapshot()
	cp2, _ := New(cartpole.Name, 2)
	flipped := append([]byte(nil), snap...)
	flipped[20] ^= 1
	tests := []struct {
		name string
		into envs.VecEnv
		snap []byte
		want string
	}{
		{"flipped bit", cp, flipped, "checksum"},
		{"truncated", cp, snap[:len(snap)-3], "checksum"},
		{"empty", cp, nil, "header"},
		{"other env", cp, pdSnap, "Pendulum-v1"},
		{"other n", cp2, snap, "3 envs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.into.(Snapshotter).RestoreSnapshot(tc.snap)
			if err == nil || !errors.Is(err, errSnapshot) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a bad-snapshot error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestStepDoesNotAllocate(t *testing.T) {
	const n = 16
	v, _ := New(cartpole.Name, n)
	obs, fin, act, rew := make([]float32, 4*n), make([]float32, 4*n), make([]float32, n), make([]float32, n)
	te, tr := make([]bool, n), make([]bool, n)
	_ = v.Reset(1, obs)
	if a := testing.AllocsPerRun(200, func() {
		if err := v.Step(act, obs, rew, te, tr, fin); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("Step allocates %v times per call", a)
	}
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// BenchmarkCartPoleStep measures batched native CartPole steps per second
// (one env step = one instance advancing once) on one goroutine.
func BenchmarkCartPoleStep(b *testing.B) {
	for _, n := range []int{1, 64, 1024} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			v, _ := New(cartpole.Name, n)
			obs, fin, act, rew := make([]float32, 4*n), make([]float32, 4*n), make([]float32, n), make([]float32, n)
			te, tr := make([]bool, n), make([]bool, n)
			_ = v.Reset(1, obs)
			for i := range act {
				act[i] = float32(i % 2)
			}
			b.ResetTimer()
			for range b.N {
				if err := v.Step(act, obs, rew, te, tr, fin); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*float64(n)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
