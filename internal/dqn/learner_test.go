package dqn

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/sdk/go/envs"
	"github.com/trainyard/trainyard/sdk/go/envs/cartpole"
	"github.com/trainyard/trainyard/sdk/go/envs/native"
	"github.com/trainyard/trainyard/sdk/go/envs/pendulum"
)

// openNative makes evaluation envs as a run's session does.
func openNative(name string) func(context.Context, int, uint64) (envs.VecEnv, error) {
	return func(_ context.Context, n int, seed uint64) (envs.VecEnv, error) {
		v, err := native.New(name, n)
		if err != nil {
			return nil, err
		}
		return v, v.Reset(seed, make([]float32, n*v.Spec().Observation.Dim()))
	}
}

// small is a config that trains within a few iterations: learning starts
// early and the buffer wraps, so a checkpoint holds a full ring.
func small() Config {
	c := CartPoleConfig()
	c.NumSteps, c.LearningStarts, c.BufferSize = 16, 64, 300
	c.TrainFreq, c.GradientSteps, c.TargetUpdateInterval, c.BatchSize = 32, 4, 6, 16
	c.ExplorationSteps, c.EvalEvery, c.EvalEpisodes, c.EvalEnvs = 400, 3, 4, 2
	c.Hidden = []int{8}
	return c
}

func newSmall(t *testing.T, seed uint64) *Learner {
	t.Helper()
	venv, err := native.New(cartpole.Name, 4)
	if err != nil {
		t.Fatal(err)
	}
	c := small()
	c.Seed = seed
	l, err := New(venv, openNative(cartpole.Name), c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func save(t *testing.T, l *Learner) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := l.Save(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func iterate(t *testing.T, l *Learner, n int) []learner.Metrics {
	t.Helper()
	var ms []learner.Metrics
	for range n {
		m, err := l.Iterate(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		m.StepsPerSecond = 0 // wall time
		ms = append(ms, m)
	}
	return ms
}

// TestResumeIsExact: a learner restored from a checkpoint (replay buffer
// wrapped, mid-episode, between evaluations and target syncs) continues
// bit for bit as the saved one does, metrics and state.
func TestResumeIsExact(t *testing.T) {
	a := newSmall(t, 7)
	iterate(t, a, 7)
	if a.buf.len() != a.cfg.BufferSize || a.buf.pos == 0 {
		t.Fatalf("buffer %d/%d at %d: the test wants a wrapped ring", a.buf.len(), a.cfg.BufferSize, a.buf.pos)
	}
	ckpt := save(t, a)
	venv, _ := native.New(cartpole.Name, 4)
	b, err := Restore(bytes.NewReader(ckpt), venv, openNative(cartpole.Name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(save(t, b), ckpt) {
		t.Fatal("a restored learner saves different bytes")
	}
	ma, mb := iterate(t, a, 5), iterate(t, b, 5)
	for i := range ma {
		ja, _ := ma[i].MarshalJSON()
		jb, _ := mb[i].MarshalJSON()
		if !bytes.Equal(ja, jb) {
			t.Fatalf("iteration %d after resume differs:\n%s\n%s", i, ja, jb)
		}
	}
	if !bytes.Equal(save(t, a), save(t, b)) {
		t.Fatal("state differs 5 iterations after resume")
	}
	if _, ok := ma[1].Values["eval_return_mean"]; !ok || ma[1].RecentEpisodes != 4 {
		t.Fatalf("iteration 9 should evaluate 4 episodes: %+v", ma[1])
	}
}

// TestSameSeedSameRun and a different seed a different one.
func TestSeeds(t *testing.T) {
	a, b, c := newSmall(t, 1), newSmall(t, 1), newSmall(t, 2)
	iterate(t, a, 4)
	iterate(t, b, 4)
	iterate(t, c, 4)
	if !bytes.Equal(save(t, a), save(t, b)) {
		t.Fatal("one seed, two runs")
	}
	if bytes.Equal(save(t, a), save(t, c)) {
		t.Fatal("two seeds, one run")
	}
}

func TestMetrics(t *testing.T) {
	l := newSmall(t, 3)
	ms := iterate(t, l, 6)
	first, last := ms[0], ms[5]
	if _, ok := first.Values["q_loss"]; ok {
		t.Fatalf("trained before learning_starts: %+v", first.Values)
	}
	if first.Values["epsilon"] >= 1 || last.Values["epsilon"] >= first.Values["epsilon"] {
		t.Fatalf("epsilon does not decay: %v then %v", first.Values["epsilon"], last.Values["epsilon"])
	}
	if last.Timesteps != 6*16*4 || last.Iteration != 6 || last.Values["gradient_steps"] <= 0 {
		t.Fatalf("counters: %+v", last)
	}
	for _, name := range []string{"q_loss", "q_mean", "grad_norm", "buffer_size", "train_return_mean"} {
		if _, ok := last.Values[name]; !ok {
			t.Errorf("no %s in %v", name, last.Names())
		}
	}
	if !strings.Contains(last.Brief(), "eps ") {
		t.Errorf("brief %q", last.Brief())
	}
	// Without evaluation envs the return is the training window's.
	venv, _ := native.New(cartpole.Name, 4)
	c := small()
	l2, err := New(venv, nil, c)
	if err != nil {
		t.Fatal(err)
	}
	m := iterate(t, l2, 3)[2]
	if m.RecentReturnMean != m.Values["train_return_mean"] || m.RecentEpisodes == 0 {
		t.Fatalf("no eval envs: recent %v over %d, train %v", m.RecentReturnMean, m.RecentEpisodes, m.Values["train_return_mean"])
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		hyper map[string]any
		field string
	}{
		{map[string]any{"gamma": 1.5}, "hyperparameters.gamma"},
		{map[string]any{"buffer_size": 0}, "hyperparameters.buffer_size"},
		{map[string]any{"buffer_size": 1e9}, "hyperparameters.buffer_size"},
		{map[string]any{"batch_size": -1}, "hyperparameters.batch_size"},
		{map[string]any{"train_freq": 0}, "hyperparameters.train_freq"},
		{map[string]any{"target_update_interval": 0}, "hyperparameters.target_update_interval"},
		{map[string]any{"exploration_final_eps": 2}, "hyperparameters.exploration_final_eps"},
		{map[string]any{"hidden": []any{0}}, "hyperparameters.hidden"},
		{map[string]any{"learning_rate": "fast"}, "hyperparameters.learning_rate"},
		{map[string]any{"clip_coef": 0.2}, "hyperparameters.clip_coef"},
		{map[string]any{"seed": 3}, "hyperparameters.seed"},
	} {
		_, err := Factory{}.Config(cartpole.Name, learner.Knobs{Hyperparameters: tc.hyper})
		var fe *learner.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%v: got %v, want a field error on %s", tc.hyper, err, tc.field)
		}
	}
	c, err := Factory{}.Tuned(cartpole.Name, learner.Knobs{Seed: 4, EpisodeLength: 32, BatchSize: 128, Hyperparameters: map[string]any{"double_q": false}})
	if err != nil || c.Seed != 4 || c.NumSteps != 32 || c.BatchSize != 128 || c.DoubleQ {
		t.Fatalf("knobs not applied: %+v, %v", c, err)
	}
}

func TestRefusesContinuousActions(t *testing.T) {
	venv, _ := native.New(pendulum.Name, 2)
	_, err := Factory{}.New(learner.Env{Train: venv}, learner.Knobs{})
	if err == nil || !strings.Contains(err.Error(), "discrete action space") {
		t.Fatalf("got %v", err)
	}
}

// TestRefusesAHugeReplayBuffer: a run's hyper-parameters cannot make an
// agent hold more replay than the bound (buffer_size alone is within its
// range; the obs width makes it too large).
func TestRefusesAHugeReplayBuffer(t *testing.T) {
	venv, _ := native.New(cartpole.Name, 2)
	c := small()
	c.BufferSize = maxBuffer
	if _, err := New(venv, nil, c); err != nil {
		t.Fatalf("10M CartPole transitions (4 obs values) fit: %v", err)
	}
	wide := wideEnv{venv}
	if _, err := New(wide, nil, c); err == nil || !strings.Contains(err.Error(), "buffer_size") {
		t.Fatalf("10M transitions of 100 obs values: got %v", err)
	}
}

// wideEnv claims 100 observation values; build refuses it before a step.
type wideEnv struct{ envs.VecEnv }

func (w wideEnv) Spec() envs.Spec {
	s := w.VecEnv.Spec()
	s.Observation.Shape = []int{100}
	return s
}

func TestRestoreRefusesBadCheckpoints(t *testing.T) {
	l := newSmall(t, 1)
	iterate(t, l, 2)
	ckpt := save(t, l)
	flip := bytes.Clone(ckpt)
	flip[len(flip)/2] ^= 1
	venv, _ := native.New(cartpole.Name, 4)
	other, _ := native.New(cartpole.Name, 3)
	for name, tc := range map[string]struct {
		data []byte
		env  envs.VecEnv
	}{
		"truncated": {ckpt[:len(ckpt)-10], venv},
		"flipped":   {flip, venv},
		"empty":     {nil, venv},
		"ppo":       {[]byte("TYPPOCKP...................................................."), venv},
		"other env": {ckpt, other},
	} {
		_, err := Restore(bytes.NewReader(tc.data), tc.env, nil)
		if !errors.Is(err, ErrCheckpoint) {
			t.Errorf("%s: got %v, want ErrCheckpoint", name, err)
		}
	}
}

func FuzzRestore(f *testing.F) {
	venv, _ := native.New(cartpole.Name, 4)
	c := small()
	c.BufferSize = 50
	l, _ := New(venv, nil, c)
	for range 2 {
		l.Iterate(context.Background())
	}
	var b bytes.Buffer
	l.Save(&b)
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		env, _ := native.New(cartpole.Name, 4)
		if r, err := Restore(bytes.NewReader(data), env, nil); err == nil {
			r.Iterate(context.Background())
		}
	})
}

func BenchmarkIterate(b *testing.B) {
	venv, _ := native.New(cartpole.Name, 8)
	c := CartPoleConfig()
	c.LearningStarts, c.EvalEvery = 0, 0
	l, err := New(venv, nil, c)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := l.Iterate(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*c.NumSteps*8)/b.Elapsed().Seconds(), "env_steps/s")
}
