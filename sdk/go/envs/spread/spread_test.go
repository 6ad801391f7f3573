package spread

import (
	"math/rand/v2"
	"testing"

	"github.com/trainyard/trainyard/sdk/go/envs/multiagent"
)

// meanReturn plays games episodes with act choosing each agent's action.
func meanReturn(t testing.TB, games int, act func(obs []float32, rng *rand.Rand) int) float64 {
	t.Helper()
	b, err := multiagent.New(Spec(), games*Agents, func() multiagent.Env { return &Env{} })
	if err != nil {
		t.Fatal(err)
	}
	n := games * Agents
	obs, fin, actions, rew := make([]float32, n*ObsDim), make([]float32, n*ObsDim), make([]float32, n), make([]float32, n)
	term, trunc := make([]bool, n), make([]bool, n)
	if err := b.Reset(7, obs); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var sum float64
	for range Steps {
		for i := range n {
			actions[i] = float32(act(obs[i*ObsDim:(i+1)*ObsDim], rng))
		}
		if err := b.Step(actions, obs, rew, term, trunc, fin); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			sum += float64(rew[i])
		}
	}
	return sum / float64(n)
}

func TestBaselines(t *testing.T) {
	random := meanReturn(t, 2000, func(_ []float32, rng *rand.Rand) int { return rng.IntN(Moves) })
	scripted := meanReturn(t, 2000, func(obs []float32, _ *rand.Rand) int { return NearestUnclaimed(obs) })
	t.Logf("random %.2f scripted %.2f", random, scripted)
	if scripted <= random {
		t.Fatalf("scripted %.2f is no better than random %.2f", scripted, random)
	}
}
