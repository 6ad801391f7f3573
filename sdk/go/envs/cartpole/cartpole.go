// Package cartpole is Gymnasium's CartPole-v1 in pure Go: the same constants,
// Euler integration, termination limits, reward and 500-step truncation.
// State is float64 and observations float32, as in Gymnasium. It imports no
// cgo, os, syscall or fmt and does not allocate in Step, so a GOOS=wasip1 build
// of a plugin that imports it steps bit-identically to the native one.
//
// Only the random stream differs from Gymnasium (NumPy's generator is not
// reproduced): an Env seeded with s draws from math/rand/v2's PCG seeded with
// (s, Stream), one Float64 per state variable in order x, x_dot, theta,
// theta_dot, mapped to -0.05 + 0.1*u.
//
// Bit-identity holds between targets that round every float operation
// (amd64 at GOAMD64 v1/v2, wasm); targets where Go fuses multiply-adds
// (arm64, amd64 v3) may differ in the last bits, math.Sin/Cos included.
package cartpole

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Gymnasium CartPole-v1 constants.
const (
	Gravity         = 9.8
	MassCart        = 1.0
	MassPole        = 0.1
	TotalMass       = MassPole + MassCart
	Length          = 0.5 // half the pole's length
	PoleMassLength  = MassPole * Length
	ForceMag        = 10.0
	Tau             = 0.02 // seconds between state updates
	XThreshold      = 2.4
	MaxEpisodeSteps = 500
	ObsDim          = 4
	// Stream is the second PCG seed word; the first is the env's seed.
	Stream uint64 = 0x9E3779B97F4A7C15
	// resetBound is the half-width of the uniform reset distribution.
	resetBound = 0.05
)

// thetaThreshold is 12 degrees in radians, computed in float64 steps as
// Python computes 12 * 2 * math.pi / 360: Go's exact constant arithmetic
// would round once and land one ulp away.
var thetaThreshold = func() float64 {
	pi := math.Pi
	return 24 * pi / 360
}()

// ThetaThreshold is the pole angle (radians) past which an episode ends.
func ThetaThreshold() float64 { return thetaThreshold }

// Name is the environment's registered name.
const Name = "CartPole-v1"

// Spec describes CartPole-v1's spaces as Gymnasium declares them.
func Spec() envs.Spec {
	hi := []float32{XThreshold * 2, math.MaxFloat32, float32(thetaThreshold * 2), math.MaxFloat32}
	lo := make([]float32, len(hi))
	for i, h := range hi {
		lo[i] = -h
	}
	return envs.Spec{
		Name:            Name,
		Observation:     envs.Space{Kind: envs.Box, Shape: []int{ObsDim}, Low: lo, High: hi},
		Action:          envs.Space{Kind: envs.Discrete, N: 2},
		MaxEpisodeSteps: MaxEpisodeSteps,
	}
}

// Env is one CartPole instance: call Seed, then Reset. It holds no
// pointers, so copying an Env forks it.
type Env struct {
	pcg   rand.PCG
	state [4]float64 // x, x_dot, theta, theta_dot
	steps int        // steps since the last reset
	// done is set once the episode terminated; Gymnasium returns reward 0
	// for steps taken after that.
	done bool
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
func (e *Env) Seed(seed uint64) {
	e.pcg.Seed(seed, Stream)
}

// uniform01 is math/rand/v2's Rand.Float64 over the PCG, inlined so Env
// holds no pointer to itself and can be copied.
func (e *Env) uniform01() float64 {
	return float64(e.pcg.Uint64()<<11>>11) / (1 << 53)
}

// Reset draws a new initial state and writes the observation to obs[:4].
func (e *Env) Reset(obs []float32) {
	for i := range e.state {
		e.state[i] = -resetBound + 2*resetBound*e.uniform01()
	}
	e.steps = 0
	e.done = false
	e.Observe(obs)
}

// Observe writes the current observation to obs[:4].
func (e *Env) Observe(obs []float32) {
	_ = obs[3]
	obs[0] = float32(e.state[0])
	obs[1] = float32(e.state[1])
	obs[2] = float32(e.state[2])
	obs[3] = float32(e.state[3])
}

// State returns the float64 state (x, x_dot, theta, theta_dot).
func (e *Env) State() [4]float64 { return e.state }

// SetState sets the float64 state; tests use it to start known trajectories.
func (e *Env) SetState(s [4]float64) { e.state = s; e.done = false }

// Steps is the number of steps since the last reset.
func (e *Env) Steps() int { return e.steps }

// Step applies action (1 pushes right, anything else left, as an invalid
// action is the caller's bug) and writes the next observation to obs[:4].
// terminated is Gymnasium's: the pole passed ±12° or the cart ±2.4;
// truncated is the TimeLimit wrapper's: the 500th step since the reset.
func (e *Env) Step(action int, obs []float32) (reward float32, terminated, truncated bool) {
	x, xDot, theta, thetaDot := e.state[0], e.state[1], e.state[2], e.state[3]
	force := -ForceMag
	if action == 1 {
		force = ForceMag
	}
	cos, sin := math.Cos(theta), math.Sin(theta)
	temp := (force + PoleMassLength*(thetaDot*thetaDot)*sin) / TotalMass
	thetaAcc := (Gravity*sin - cos*temp) / (Length * (4.0/3.0 - MassPole*(cos*cos)/TotalMass))
	xAcc := temp - PoleMassLength*thetaAcc*cos/TotalMass
	x += Tau * xDot
	xDot += Tau * xAcc
	theta += Tau * thetaDot
	thetaDot += Tau * thetaAcc
	e.state = [4]float64{x, xDot, theta, thetaDot}
	e.steps++

	terminated = x < -XThreshold || x > XThreshold || theta < -thetaThreshold || theta > thetaThreshold
	reward = 1
	if e.done {
		reward = 0
	}
	if terminated {
		e.done = true
	}
	truncated = e.steps >= MaxEpisodeSteps
	e.Observe(obs)
	return reward, terminated, truncated
}

// snapshotVersion prefixes the encoding: version byte, 4 float64 state,
// uint64 steps, done byte, PCG state.
const snapshotVersion = 1

// MarshalBinary encodes the whole env state, random stream included, so a
// restored env continues exactly where this one is.
func (e *Env) MarshalBinary() ([]byte, error) {
	pcg, err := e.pcg.MarshalBinary()
	if err != nil {
		return nil, errors.Join(errors.New("cartpole: marshal rng"), err)
	}
	b := make([]byte, 0, 1+4*8+8+1+len(pcg))
	b = append(b, snapshotVersion)
	for _, v := range e.state {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(e.steps))
	if e.done {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return append(b, pcg...), nil
}

// UnmarshalBinary restores a state written by MarshalBinary.
func (e *Env) UnmarshalBinary(b []byte) error {
	const head = 1 + 4*8 + 8 + 1
	if len(b) < head {
		return errors.New("cartpole: snapshot too short")
	}
	if b[0] != snapshotVersion {
		return errors.New("cartpole: unknown snapshot version")
	}
	var pcg rand.PCG
	if err := pcg.UnmarshalBinary(b[head:]); err != nil {
		return errors.Join(errors.New("cartpole: unmarshal rng"), err)
	}
	for i := range e.state {
		e.state[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[1+8*i:]))
	}
	e.steps = int(binary.LittleEndian.Uint64(b[33:]))
	e.done = b[41] != 0
	e.pcg = pcg
	return nil
}
