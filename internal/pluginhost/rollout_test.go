package pluginhost

import (
	"context"
	"testing"

	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/sdk/go/envs/native"
)

// TestRollout: a random-action rollout over the Go CartPole plugin reports
// the same episode statistics as over the native env (same seed, same
// actions, bit-identical envs), and Pendulum's fixed 200-step episodes.
func TestRollout(t *testing.T) {
	rt := newTestRuntime(t)
	ctx := context.Background()
	tests := []struct {
		pkg, name string
		check     func(t *testing.T, st RolloutStats)
	}{
		{"./plugins/cartpole", "CartPole-v1", func(t *testing.T, st RolloutStats) {
			if st.MeanLength < 18 || st.MeanLength > 27 || st.MeanReturn != st.MeanLength {
				t.Errorf("CartPole random policy: %+v, want mean length ≈ 22 = mean return", st)
			}
		}},
		{"./plugins/pendulum", "Pendulum-v1", func(t *testing.T, st RolloutStats) {
			if st.MeanLength != 200 || st.MaxReturn >= 0 || st.MinReturn < -16.3*200 {
				t.Errorf("Pendulum random policy: %+v, want 200-step episodes with negative returns", st)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := load(t, rt, plugintest.BuildGo(t, tc.pkg), testLimits).NewVecEnv(ctx, 16, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			got, err := Rollout(ctx, v, 20_000, 42)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := native.New(tc.name, 16)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Rollout(ctx, ref, 20_000, 42)
			if err != nil {
				t.Fatal(err)
			}
			if got.Steps != want.Steps || got.Episodes != want.Episodes || got.MeanReturn != want.MeanReturn ||
				got.MinReturn != want.MinReturn || got.MaxReturn != want.MaxReturn || got.MeanLength != want.MeanLength {
				t.Fatalf("plugin rollout %+v, native %+v", got, want)
			}
			if got.Episodes == 0 || got.StepsPerSec <= 0 {
				t.Fatalf("rollout %+v", got)
			}
			tc.check(t, got)
		})
	}
}
