package pluginhost

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/sdk/go/envs/native"
)

// TestWorkerParity: the Go CartPole plugin in a worker process is
// bit-identical to native, like in process.
func TestWorkerParity(t *testing.T) {
	rt := newTestRuntime(t)
	m := load(t, rt, plugintest.BuildGo(t, "./plugins/cartpole"), testLimits)
	w, err := m.NewWorkerVecEnv(context.Background(), 16, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ref, err := native.New("CartPole-v1", 16)
	if err != nil {
		t.Fatal(err)
	}
	compareRollout(t, ref, w, 7, 1000)
}

// TestWorkerHostile: deadlines kill the worker, crashes are reported, bad
// input keeps it, and Reset brings up a fresh worker after a failure.
func TestWorkerHostile(t *testing.T) {
	rt := newTestRuntime(t)
	m := load(t, rt, plugintest.BuildGo(t, "./internal/pluginhost/testdata/hostile"), testLimits)
	tests := []struct {
		name string
		seed uint64
		act  float32
		want error
		msg  string
	}{
		{"infinite loop in step", 1, 0, ErrTimeout, "worker killed"},
		{"fatal error mid-batch", 3, 0, ErrTrap, "unlock of unlocked mutex"},
		{"panic mid-batch", 4, 0, ErrGuestFault, "panic: env 2 exploded"},
		{"bad action", 0, 7, ErrBadInput, "not in Discrete(2)"},
	}
	w, err := m.NewWorkerVecEnv(context.Background(), 4, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := newBatch(w, 1, 1)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := w.Reset(tc.seed, b.obs); err != nil {
				t.Fatal(err)
			}
			b.act[0] = tc.act
			err := w.Step(b.act, b.obs, b.rew, b.term, b.trunc, b.fin)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "hostile@0.0.1") {
				t.Fatalf("error = %v, want %v mentioning %q", err, tc.want, tc.msg)
			}
			b.act[0] = 0
			err = w.Step(b.act, b.obs, b.rew, b.term, b.trunc, b.fin)
			if tc.want == ErrBadInput {
				if err != nil {
					t.Fatalf("worker unusable after bad input: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), "call Reset") {
				t.Fatalf("step after failure = %v, want a call-Reset error", err)
			}
		})
	}
	// A fresh worker serves again.
	if err := w.Reset(0, b.obs); err != nil {
		t.Fatal(err)
	}
	if err := w.Step(b.act, b.obs, b.rew, b.term, b.trunc, b.fin); err != nil || b.obs[3] != 3 {
		t.Fatalf("fresh worker: obs %v, %v", b.obs, err)
	}
}
