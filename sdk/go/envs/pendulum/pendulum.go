// Package pendulum is Gymnasium's Pendulum-v1 in pure Go: the same constants,
// dynamics, cost, observation and 200-step truncation. State is float64 and
// observations float32, as in Gymnasium. It imports no cgo, os, syscall or fmt and
// does not allocate in Step, so a GOOS=wasip1 build of a plugin that imports
// it steps bit-identically to the native one.
//
// Only the random stream differs from Gymnasium: an Env seeded with s draws
// from math/rand/v2's PCG seeded with (s, Stream), one Float64 u for theta
// (-pi + 2*pi*u) then one for theta_dot (-1 + 2*u).
//
// Bit-identity holds between targets that round every float operation
// (amd64 at GOAMD64 v1/v2, wasm); targets where Go fuses multiply-adds
// (arm64, amd64 v3) may differ in the last bits, math.Sin/Cos included.
package pendulum

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Gymnasium Pendulum-v1 constants.
const (
	MaxSpeed        = 8.0
	MaxTorque       = 2.0
	Dt              = 0.05
	G               = 10.0
	M               = 1.0
	L               = 1.0
	MaxEpisodeSteps = 200
	ObsDim          = 3
	// Stream is the second PCG seed word; the first is the env's seed.
	Stream uint64 = 0x6A09E667F3BCC909
)

// Name is the environment's registered name.
const Name = "Pendulum-v1"

// Spec describes Pendulum-v1's spaces as Gymnasium declares them.
func Spec() envs.Spec {
	return envs.Spec{
		Name: Name,
		Observation: envs.Space{Kind: envs.Box, Shape: []int{ObsDim},
			Low: []float32{-1, -1, -MaxSpeed}, High: []float32{1, 1, MaxSpeed}},
		Action: envs.Space{Kind: envs.Box, Shape: []int{1},
			Low: []float32{-MaxTorque}, High: []float32{MaxTorque}},
		MaxEpisodeSteps: MaxEpisodeSteps,
	}
}

// Env is one Pendulum instance: call Seed, then Reset. It holds no pointers,
// so copying an Env forks it.
type Env struct {
	pcg       rand.PCG
	th, thDot float64
	steps     int
}

// New returns an Env seeded with seed and reset.
func New(seed uint64) *Env {
	e := &Env{}
	e.Seed(seed)
	var obs [ObsDim]float32
	e.Reset(obs[:])
	return e
}

// Seed restarts the env's random stream from seed.
func (e *Env) Seed(seed uint64) { e.pcg.Seed(seed, Stream) }

// uniform01 is math/rand/v2's Rand.Float64 over the PCG.
func (e *Env) uniform01() float64 {
	return float64(e.pcg.Uint64()<<11>>11) / (1 << 53)
}

// Reset draws theta ~ U(-pi, pi), theta_dot ~ U(-1, 1) and writes the
// observation to obs[:3].
func (e *Env) Reset(obs []float32) {
	e.th = -math.Pi + 2*math.Pi*e.uniform01()
	e.thDot = -1 + 2*e.uniform01()
	e.steps = 0
	e.Observe(obs)
}

// Observe writes [cos th, sin th, th_dot] to obs[:3].
func (e *Env) Observe(obs []float32) {
	_ = obs[2]
	obs[0] = float32(math.Cos(e.th))
	obs[1] = float32(math.Sin(e.th))
	obs[2] = float32(e.thDot)
}

// State returns (theta, theta_dot).
func (e *Env) State() (th, thDot float64) { return e.th, e.thDot }

// SetState sets (theta, theta_dot); tests use it to start known trajectories.
func (e *Env) SetState(th, thDot float64) { e.th, e.thDot = th, thDot }

// Steps is the number of steps since the last reset.
func (e *Env) Steps() int { return e.steps }

// AngleNormalize maps x into [-pi, pi) like Python's ((x+pi) % (2pi)) - pi,
// whose modulo takes the divisor's sign.
func AngleNormalize(x float64) float64 {
	r := math.Mod(x+math.Pi, 2*math.Pi)
	if r < 0 {
		r += 2 * math.Pi
	}
	return r - math.Pi
}

// Step applies torque u (clipped to ±2) and writes the next observation to
// obs[:3]. Pendulum never terminates; truncated is set on the 200th step
// since the reset. NaN torque is the caller's bug and propagates.
func (e *Env) Step(u float32, obs []float32) (reward float32, terminated, truncated bool) {
	uc := float64(min(max(u, -MaxTorque), MaxTorque))
	th, thDot := e.th, e.thDot
	an := AngleNormalize(th)
	cost := an*an + 0.1*thDot*thDot + 0.001*(uc*uc)
	newThDot := thDot + (3*G/(2*L)*math.Sin(th)+3.0/(M*L*L)*uc)*Dt
	newThDot = min(max(newThDot, -MaxSpeed), MaxSpeed)
	e.th = th + newThDot*Dt
	e.thDot = newThDot
	e.steps++
	e.Observe(obs)
	return float32(-cost), false, e.steps >= MaxEpisodeSteps
}

const snapshotVersion = 1

// MarshalBinary encodes the whole env state, random stream included:
// version byte, theta, theta_dot, uint64 steps, PCG state.
func (e *Env) MarshalBinary() ([]byte, error) {
	pcg, err := e.pcg.MarshalBinary()
	if err != nil {
		return nil, errors.Join(errors.New("pendulum: marshal rng"), err)
	}
	b := make([]byte, 0, 1+3*8+len(pcg))
	b = append(b, snapshotVersion)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e.th))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e.thDot))
	b = binary.LittleEndian.AppendUint64(b, uint64(e.steps))
	return append(b, pcg...), nil
}

// UnmarshalBinary restores a state written by MarshalBinary.
func (e *Env) UnmarshalBinary(b []byte) error {
	const head = 1 + 3*8
	if len(b) < head {
		return errors.New("pendulum: snapshot too short")
	}
	if b[0] != snapshotVersion {
		return errors.New("pendulum: unknown snapshot version")
	}
	var pcg rand.PCG
	if err := pcg.UnmarshalBinary(b[head:]); err != nil {
		return errors.Join(errors.New("pendulum: unmarshal rng"), err)
	}
	e.th = math.Float64frombits(binary.LittleEndian.Uint64(b[1:]))
	e.thDot = math.Float64frombits(binary.LittleEndian.Uint64(b[9:]))
	e.steps = int(binary.LittleEndian.Uint64(b[17:]))
	e.pcg = pcg
	return nil
}
