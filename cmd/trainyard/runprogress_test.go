package main

import (
	"strings"
	"testing"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/scalars"
	"github.com/trainyard/trainyard/internal/training"
)

// TestProgressLineOfEveryKind: a command trainer's line shows the step and
// return it reports (not the built-in trainer's zeros), and an LLM loop
// that ended shows its rate over the whole run, not 0 traj/s.
func TestProgressLineOfEveryKind(t *testing.T) {
	cmd := api.Run{Spec: training.Spec{Algorithm: training.AlgorithmCommand}}
	cmd.Progress.State, cmd.Progress.Checkpoint = "running", 3
	cmd.Scalars = map[string]scalars.ScalarPoint{
		"charts/episodic_return": {Step: 4096, Value: 187.25},
		"loss":                   {Step: 4000, Value: 0.0312},
		"lr":                     {Step: 4096, Value: 3e-4},
		"sps":                    {Step: 4096, Value: 5100},
	}
	llm := api.Run{Spec: training.Spec{Kind: training.KindLLM, LLM: &training.Loop{Steps: 50}}}
	llm.Progress.State = "succeeded"
	llm.Progress.Loop = &training.LoopStatus{Step: 50, TrajectoriesPerSec: 42.5}
	for _, tc := range []struct {
		name string
		run  api.Run
		want []string
		not  []string
	}{
		{"command", cmd, []string{"step 4096", "return 187.2", "loss 0.0312", "lr 0.0003", "ckpt 3"}, []string{"iter 0", "0 steps/s", "sps"}},
		{"command, nothing reported yet", api.Run{Spec: cmd.Spec}, []string{"step 0"}, []string{"return"}},
		{"llm loop that ended", llm, []string{"step 50/50", "42 traj/s"}, []string{" 0 traj/s"}},
	} {
		line := progressLine(tc.run)
		for _, w := range tc.want {
			if !strings.Contains(line, w) {
				t.Errorf("%s: %q lacks %q", tc.name, line, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(line, n) {
				t.Errorf("%s: %q shows %q", tc.name, line, n)
			}
		}
	}
}
