//go:build !race

package ppo

import (
	"context"
	"testing"

	"github.com/trainyard/trainyard/internal/learner"
)

// Against tit-for-tat with γ = 0.99, cooperating is the best response: the
// trained policy must find it (seed 1 cooperates in ≥ 90% of rounds from
// iteration 33, ~34k env steps).
func TestLearnToCooperateWithTitForTat(t *testing.T) {
	l, err := Factory{}.New(learner.Env{Train: ipdEnv(t, 8)}, learner.Knobs{Seed: 1, Workers: 2, MultiAgent: versusTFT})
	if err != nil {
		t.Fatal(err)
	}
	var m learner.Metrics
	for range 50 {
		if m, err = l.Iterate(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	coop := m.Values["policy/learner/action_0_rate"]
	t.Logf("after %d env steps: learner cooperates in %.3f of rounds, return %.1f (tit-for-tat %.1f), mutual cooperation %.3f",
		m.Timesteps, coop, m.Values["policy/learner/recent_return_mean"], m.Values["policy/tft/recent_return_mean"], m.Values["joint_action/0_0_rate"])
	if coop < 0.9 {
		t.Fatalf("the learner cooperates in %.3f of rounds against tit-for-tat, want ≥ 0.9", coop)
	}
	if m.RecentReturnMean != m.Values["policy/learner/recent_return_mean"] {
		t.Errorf("the run's return %v is not its one trained policy's %v", m.RecentReturnMean, m.Values["policy/learner/recent_return_mean"])
	}
	if _, ok := m.Values["policy/tft/policy_loss"]; ok {
		t.Error("a script reports a policy loss")
	}
}

// A checkpoint holds every policy: the restored learner saves the same
// bytes and its next iterations are the saved one's, bit for bit.
