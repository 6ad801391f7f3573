package training

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/embedded/s3test"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/internal/plugintest"
	"github.com/trainyard/trainyard/internal/ppo"
)

var (
	bucket *objstore.Store
	// Built before S3 starts: versitygw's posix backend chdirs into its
	// root, after which the repository can no longer be found from the cwd.
	cartpoleWasm, pendulumWasm, arithmeticWasm []byte
)

func buildPlugin(pkg string) ([]byte, error) {
	out := filepath.Join(os.TempDir(), fmt.Sprintf("training-test-%d-%s.wasm", os.Getpid(), filepath.Base(pkg)))
	defer os.Remove(out)
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build %s: %v\n%s", pkg, err, b)
	}
	return os.ReadFile(out)
}

// TestMain builds the example plugins and starts the real embedded S3
// server on loopback.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		var err error
		if cartpoleWasm, err = buildPlugin("./plugins/cartpole"); err == nil {
			pendulumWasm, err = buildPlugin("./plugins/pendulum")
		}
		if err == nil {
			arithmeticWasm, err = buildPlugin("./plugins/arithmetic")
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return s3test.Main(m, "training-test", func(s *objstore.Store, _ string) { bucket = s })
	}())
}

// loopSpec is a valid kind llm spec, changed by edit.
func loopSpec(edit func(*Spec)) Spec {
	s := Spec{Kind: KindLLM, Cluster: "lab", Env: "arithmetic", Command: []string{"python3", "train.py"},
		Capabilities: &Capabilities{HTTP: []string{"llm"}}, LLM: &Loop{Steps: 10}}
	edit(&s)
	return s
}

func TestSpecValidate(t *testing.T) {
	nan := func() *float64 { v := 0.0; v /= v; return &v }()
	for _, tc := range []struct {
		name  string
		spec  Spec
		field string // "" = valid
	}{
		{"defaults", Spec{Cluster: "lab", Env: "CartPole-v1"}, ""},
		{"no cluster", Spec{Env: "x"}, "cluster"},
		{"no env", Spec{Cluster: "lab"}, "env"},
		{"algorithm", Spec{Cluster: "lab", Env: "x", Algorithm: "sarsa"}, "algorithm"},
		{"workers", Spec{Cluster: "lab", Env: "x", Workers: 65}, "workers"},
		{"infeasible grace", Spec{Cluster: "lab", Env: "x", InfeasibleGrace: "soon"}, "infeasible_grace"},
		{"negative grace", Spec{Cluster: "lab", Env: "x", InfeasibleGrace: "-5m"}, "infeasible_grace"},
		{"envs", Spec{Cluster: "lab", Env: "x", EnvsPerWorker: 5000}, "envs_per_worker"},
		{"nan target", Spec{Cluster: "lab", Env: "x", TargetReturn: nan}, "target_return"},
		{"unknown hyper", Spec{Cluster: "lab", Env: "x", Hyperparameters: map[string]any{"learning_rat": 0.1}}, "hyperparameters.learning_rat"},
		{"seed as hyper", Spec{Cluster: "lab", Env: "x", Hyperparameters: map[string]any{"seed": 1}}, "hyperparameters.seed"},
		{"mistyped hyper", Spec{Cluster: "lab", Env: "x", Hyperparameters: map[string]any{"epochs": "many"}}, "hyperparameters.epochs"},
		{"bad hyper value", Spec{Cluster: "lab", Env: "x", Hyperparameters: map[string]any{"gamma": 2}}, "hyperparameters"},
		{"good hypers", Spec{Cluster: "lab", Env: "x", Hyperparameters: map[string]any{"learning_rate": 3e-4, "hidden": []any{32, 32}}}, ""},
		{"http grant", Spec{Cluster: "lab", Env: "x", Capabilities: &Capabilities{HTTP: []string{"llm"}, HTTPRate: 20}}, ""},
		{"http grant bad name", Spec{Cluster: "lab", Env: "x", Capabilities: &Capabilities{HTTP: []string{"https://api.openai.com"}}}, "capabilities.http[0]"},
		{"http grant twice", Spec{Cluster: "lab", Env: "x", Capabilities: &Capabilities{HTTP: []string{"llm", "llm"}}}, "capabilities.http[1]"},
		{"http rate negative", Spec{Cluster: "lab", Env: "x", Capabilities: &Capabilities{HTTP: []string{"llm"}, HTTPRate: -1}}, "capabilities.http_rate"},
		{"http rate without endpoints", Spec{Cluster: "lab", Env: "x", Capabilities: &Capabilities{HTTPRate: 5}}, "capabilities.http"},
		{"loop", loopSpec(func(*Spec) {}), ""},
		{"loop, remote trainer", loopSpec(func(s *Spec) {
			s.Command, s.LLM.Remote = nil, &RemoteTrainer{Endpoint: "tuner"}
		}), ""},
		{"loop without llm", loopSpec(func(s *Spec) { s.LLM = nil }), "llm"},
		{"loop without steps", loopSpec(func(s *Spec) { s.LLM.Steps = 0 }), "llm.steps"},
		{"loop without endpoints", loopSpec(func(s *Spec) { s.Capabilities = nil }), "capabilities.http"},
		{"loop without trainer", loopSpec(func(s *Spec) { s.Command = nil }), "command"},
		{"loop with two trainers", loopSpec(func(s *Spec) { s.LLM.Remote = &RemoteTrainer{Endpoint: "tuner"} }), "llm.remote"},
		{"loop remote, a URL for a name", loopSpec(func(s *Spec) {
			s.Command, s.LLM.Remote = nil, &RemoteTrainer{Endpoint: "https://t.example/step"}
		}), "llm.remote.endpoint"},
		{"loop remote without a name", loopSpec(func(s *Spec) { s.Command, s.LLM.Remote = nil, &RemoteTrainer{} }), "llm.remote.endpoint"},
		{"loop pool smaller than a batch", loopSpec(func(s *Spec) { s.LLM.Batch, s.LLM.PoolCapacity = 64, 32 }), "llm.pool_capacity"},
		{"loop pool policy", loopSpec(func(s *Spec) { s.LLM.PoolPolicy = "fifo" }), "llm.pool_policy"},
		{"loop concurrency", loopSpec(func(s *Spec) { s.LLM.MaxConcurrency = 20000 }), "llm.max_concurrency"},
		{"llm section on a training run", Spec{Cluster: "lab", Env: "x", LLM: &Loop{Steps: 1}}, "llm"},
		{"unknown kind", Spec{Cluster: "lab", Env: "x", Kind: "rlhf"}, "kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.WithDefaults().Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("want a FieldError on %s, got %v", tc.field, err)
			}
		})
	}
}

func TestPPOConfigKnobs(t *testing.T) {
	s := Spec{Workers: 2, EnvsPerWorker: 4, EpisodeLength: 64, BatchSize: 128, Seed: 9,
		Hyperparameters: map[string]any{"learning_rate": 0.002}}.WithDefaults()
	c, err := ppoConfig(s, "CartPole-v1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Workers != 2 || c.NumSteps != 64 || c.MinibatchSize != 128 || c.Seed != 9 || c.LearningRate != 0.002 || s.NumEnvs() != 8 {
		t.Fatalf("knobs not applied: %+v", c)
	}
	if c.Gamma != 0.98 { // CartPole's tuned value survives the override
		t.Fatalf("tuned defaults lost: gamma %v", c.Gamma)
	}
}

type fixture struct {
	t       *testing.T
	store   *pluginstore.Store
	rt      *pluginhost.Runtime
	ckpts   *checkpoint.Store
	cartpol string // sha256 of the Go CartPole plugin
	other   string // sha256 of the Pendulum plugin
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: plugintest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	f := &fixture{t: t, store: pluginstore.New(bucket), rt: rt,
		ckpts: checkpoint.New(bucket, checkpoint.Options{Prefix: "ckpt-" + strings.ReplaceAll(t.Name(), "/", "-")})}
	for _, p := range []struct {
		dst  *string
		wasm []byte
	}{{&f.cartpol, cartpoleWasm}, {&f.other, pendulumWasm}} {
		md, err := rt.Validate(ctx, p.wasm, pluginhost.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := f.store.Put(ctx, p.wasm, md, "test")
		if err != nil {
			t.Fatal(err)
		}
		*p.dst = rec.ID
	}
	return f
}

// runner is a node's Runner; its learners (and their run-aheads) are
// dropped before the fixture's plugin runtime closes.
func (f *fixture) runner() *Runner {
	r := &Runner{Plugins: f.rt, Store: f.store, Checkpoints: f.ckpts}
	f.t.Cleanup(r.Close)
	return r
}

// TestSpecsAreDefaultedOnce: a spec is a fixed point of WithDefaults once
// defaulted, of every kind; the agents' runners refuse one that was not
// (before it reached, say, a command trainer's sync ticker at 0 s).
func TestSpecsAreDefaultedOnce(t *testing.T) {
	for _, s := range []Spec{
		{Cluster: "lab", Env: "CartPole-v1"},
		{Cluster: "lab", Algorithm: AlgorithmCommand, Command: []string{"true"}},
		{Kind: KindLLM, Cluster: "lab", Env: "arithmetic", Command: []string{"python3", "train.py"}, LLM: &Loop{Steps: 2}},
		{Cluster: "lab", Env: "CartPole-v1", RolloutWorkers: 2},
	} {
		if s.Defaulted() == nil {
			t.Errorf("%+v passes as defaulted", s)
		}
		if err := s.WithDefaults().Defaulted(); err != nil {
			t.Errorf("%+v defaulted: %v", s, err)
		}
	}
	r := &Runner{}
	_, err := r.RunCommand(t.Context(), CommandInput{RunID: "r", Spec: Spec{Cluster: "lab", Algorithm: AlgorithmCommand, Command: []string{"true"}}}, nil)
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "not defaulted") {
		t.Fatalf("undefaulted command spec: %v", err)
	}
}

// ppoConfig is the spec's PPO config on envName (the built-in algorithms'
// learner config, as the runner builds it).
func ppoConfig(s Spec, envName string) (ppo.Config, error) {
	c, err := s.LearnerConfig(envName)
	if err != nil {
		return ppo.Config{}, err
	}
	return c.(ppo.Config), nil
}
