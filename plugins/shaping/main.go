// Command shaping is a reward plugin: potential-based shaping (Ng et al.
// 1999), r' = r + γ·Φ(s') − Φ(s) with Φ(s) = −c·‖s‖². It declares no spaces,
// so it composes with any environment; shaping of this form leaves optimal
// policies unchanged.
package main

import "github.com/trainyard/trainyard/sdk/go/plugin"

const (
	gamma = 0.99
	scale = 0.1
)

func init() {
	plugin.RegisterReward(plugin.Metadata{
		Name:        "potential-shaping",
		Version:     "1.0.0",
		Description: "r + 0.99*phi(next_obs) - phi(obs), phi(s) = -0.1*|s|^2",
	}, Shape)
}

func main() {}

// Shape is the reward function.
func Shape(obs, action, nextObs []float32, envReward float32) float32 {
	return envReward + gamma*potential(nextObs) - potential(obs)
}

func potential(s []float32) float32 {
	var sum float32
	for _, x := range s {
		sum += x * x
	}
	return -scale * sum
}
