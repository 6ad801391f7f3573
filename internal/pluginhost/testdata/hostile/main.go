// Command hostile is a misbehaving env plugin for the host's hostile-plugin
// tests. init(n) misbehaves for special n, and the seed given to reset picks
// how step_batch misbehaves:
//
//	init n=13: loop forever        init n=14: read /etc/passwd
//	seed 1: step loops forever     seed 2: step allocates without bound
//	seed 3: fatal runtime error at env n/2 (the guest dies mid-batch)
//	seed 4: panic at env n/2       other seeds: behave
package main

import (
	"fmt"
	"os"
	"sync"

	"github.com/trainyard/trainyard/sdk/go/plugin"
)

func init() {
	plugin.RegisterVecEnv(plugin.Metadata{
		Name:        "hostile",
		Version:     "0.0.1",
		Observation: plugin.Space{Kind: "box", Shape: []int{1}},
		Action:      plugin.Space{Kind: "discrete", N: 2},
	}, newVec)
}

func main() {}

var spin int

func newVec(n int) (plugin.VecEnv, error) {
	switch n {
	case 13:
		for {
			spin++
		}
	case 14:
		b, err := os.ReadFile("/etc/passwd")
		if err != nil {
			return nil, fmt.Errorf("sandbox held: %w", err)
		}
		return nil, fmt.Errorf("read %d bytes: %s", len(b), b)
	}
	return &vec{n: n}, nil
}

type vec struct {
	n    int
	mode uint64
	hog  [][]byte
}

func (v *vec) Reset(seed uint64, obs []float32) error {
	v.mode = seed
	clear(obs)
	return nil
}

func (v *vec) Step(actions, obs, rewards []float32, terminated, truncated []bool, finalObs []float32) error {
	for i := 0; i < v.n; i++ {
		if i == v.n/2 {
			switch v.mode {
			case 1:
				for {
					spin++
				}
			case 2:
				for {
					v.hog = append(v.hog, make([]byte, 1<<20))
				}
			case 3:
				var mu sync.Mutex
				mu.Unlock() // fatal error: unrecoverable, the runtime exits
			case 4:
				panic(fmt.Sprintf("env %d exploded", i))
			}
		}
		obs[i] = float32(i)
		rewards[i] = 1
	}
	return nil
}
