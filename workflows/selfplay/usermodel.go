package selfplay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/agent/procenv"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/selfplay/engine"
	"github.com/trainyard/trainyard/internal/selfplay/evaluator"
)

// Your model in the loop (Settings.Model). The platform keeps the search,
// the quality gate, the export, Elo, promotion and placement; two commands
// of yours serve a model directory to the search (the evaluator protocol,
// internal/selfplay/evaluator; sdk/python's trainyard.selfplay.serve) and
// train the next one from the exports. A model directory (any files) is
// stored content-addressed in S3 like a checkpoint, under
// <loop>/modeldirs/, and named in the loop by a key
// "modeldir:gen-000003/1" (the generation that trained it, the save).

// ModelCommands are a loop's model commands.
type ModelCommands struct {
	Evaluator []string `json:"evaluator" minItems:"1" doc:"Serves a model directory to the search: started beside every self-play batch and gauntlet that plays the model, in a work dir of its own, with TRAINYARD_MODEL_DIR, TRAINYARD_MODEL_NAME, TRAINYARD_EVAL_SOCKET (listen there: trainyard.selfplay.serve), TRAINYARD_OBS_SHAPE, TRAINYARD_NUM_ACTIONS and TRAINYARD_NUM_PLAYERS."`
	Trainer   []string `json:"trainer" minItems:"1" doc:"Trains the next candidate: TRAINYARD_DATASETS (the training window's selfplay.npz files, colon-separated), TRAINYARD_BEST_MODEL_DIR (empty before the first model), TRAINYARD_OUTPUT_DIR (write the new model directory there: any files), TRAINYARD_NUM_PLAYERS, TRAINYARD_EPOCHS and TRAINYARD_SEED. A non-zero exit fails the generation with the command's last lines."`
	MaxBatch  int      `json:"max_batch,omitempty" doc:"Most positions the evaluator gets in one batch (default 256)." minimum:"0" maximum:"65536"`
	// With either set, each phase of a generation is placed on its own:
	// see loop.phaseRequest.
	EvaluatorResources *Resources `json:"evaluator_resources,omitempty" doc:"What one evaluator needs (a GPU, say). With this or trainer_resources set, self-play, training and the gauntlet each get an allocation of their own, placed by the policy's tier preferences for their kinds (selfplay, training, evaluation: params.tier_preferences); self-play adds one evaluator's needs to the generation's cpus/gpus/memory_mb once a model of yours plays, the gauntlet one per model of yours in it."`
	TrainerResources   *Resources `json:"trainer_resources,omitempty" doc:"What the trainer needs; its allocation is a training one (Tier 1 first by the default policy). Default: the generation's cpus/gpus/memory_mb."`
}

// Resources a model command asks of its node.
type Resources struct {
	CPUs     float64 `json:"cpus,omitempty" minimum:"0"`
	GPUs     int     `json:"gpus,omitempty" minimum:"0"`
	MemoryMB int64   `json:"memory_mb,omitempty" minimum:"0"`
}

func (r *Resources) validate(field string) error {
	switch {
	case r == nil:
		return nil
	case r.CPUs < 0:
		return &FieldError{field + ".cpus", "must not be negative"}
	case r.GPUs < 0:
		return &FieldError{field + ".gpus", "must not be negative"}
	case r.MemoryMB < 0:
		return &FieldError{field + ".memory_mb", "must not be negative"}
	}
	return nil
}

// phased: the model's commands have resources of their own, so each phase
// is placed on its own.
func (m *ModelCommands) phased() bool {
	return m != nil && (m.EvaluatorResources != nil || m.TrainerResources != nil)
}

const (
	defaultMaxBatch      = 256
	defaultModelParallel = 64
	modelDirScheme       = "modeldir:"
	// evaluatorStart bounds an evaluator's start (imports, weights to the
	// GPU) until its socket answers.
	evaluatorStart = 3 * time.Minute
)

func (m ModelCommands) validate() error {
	switch {
	case len(m.Evaluator) == 0 || m.Evaluator[0] == "":
		return &FieldError{"model.evaluator", "must name a command (argv: program, then arguments)"}
	case len(m.Trainer) == 0 || m.Trainer[0] == "":
		return &FieldError{"model.trainer", "must name a command (argv: program, then arguments)"}
	case m.MaxBatch < 1 || m.MaxBatch > 65536:
		return &FieldError{"model.max_batch", "must be in [1, 65536]"}
	}
	if err := m.EvaluatorResources.validate("model.evaluator_resources"); err != nil {
		return err
	}
	return m.TrainerResources.validate("model.trainer_resources")
}

// modelDirs is where a loop's model directories are.
func modelDirs(s *objstore.Store, loopID string) *checkpoint.Store {
	return checkpoint.New(s, checkpoint.Options{Prefix: Prefix(loopID) + "modeldirs"})
}

func isModelDir(key string) bool { return strings.HasPrefix(key, modelDirScheme) }

func modelDirKey(m checkpoint.Manifest) string {
	return fmt.Sprintf("%s%s/%d", modelDirScheme, m.Run, m.Seq)
}

// restoreModelDir writes the model directory key names into dir and
// returns the model's name.
func restoreModelDir(ctx context.Context, s *objstore.Store, loopID, key, dir string) (string, error) {
	run, seqS, ok := strings.Cut(strings.TrimPrefix(key, modelDirScheme), "/")
	seq, err := strconv.ParseInt(seqS, 10, 64)
	if !ok || err != nil {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("model key %q: want %sRUN/SEQ", key, modelDirScheme), ErrFailed, nil)
	}
	store := modelDirs(s, loopID)
	m, err := store.Get(ctx, run, seq)
	if err != nil {
		return "", fmt.Errorf("model %s: %w", key, err)
	}
	if err := store.RestoreManifest(ctx, m, dir); err != nil {
		return "", fmt.Errorf("model %s: %w", key, err)
	}
	return m.Meta.Labels[labelModel], nil
}

const labelModel = "model"

// commandEnv is a model command's environment: the agent's minimal one
// (procenv), its GPUs, the extra variables, and a private work dir (the
// job user's when the agent runs jobs as one).
func (a *AgentActivities) commandEnv(extra map[string]string, gpus []int) (dir string, env []string, remove func(), err error) {
	env, err = procenv.Build(os.Environ(), procenv.Spec{Extra: extra, GPUs: gpus})
	if err != nil {
		return "", nil, nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrFailed, err)
	}
	if a.User != nil {
		return a.User.Workdir(env)
	}
	// The system temp dir: the socket's path must stay under 108 bytes.
	dir, err = os.MkdirTemp("", "trainyard-model-")
	if err != nil {
		return "", nil, nil, err
	}
	return dir, env, func() { _ = os.RemoveAll(dir) }, nil
}

func lookPath(cmd []string, field string) (string, error) {
	path, err := exec.LookPath(cmd[0])
	if err != nil {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("model.%s: command %q: %v", field, cmd[0], err), ErrFailed, err)
	}
	return path, nil
}

// served is a model directory served by the loop's evaluator command, for
// one activity: the search evaluates through Batcher.
type served struct {
	*evaluator.Batcher
	name   string
	remote *evaluator.Remote
	proc   *procenv.Process
	out    *procenv.Tail
	remove func()
}

// serve restores the model directory o.Key names, starts the evaluator on
// it and connects.
func (a *AgentActivities) serve(ctx context.Context, pc *playCtx, o Opponent) (*served, error) {
	cmd := pc.model.Evaluator
	path, err := lookPath(cmd, "evaluator")
	if err != nil {
		return nil, err
	}
	shape := make([]string, len(pc.meta.Observation.Shape))
	obsDim := 1
	for i, d := range pc.meta.Observation.Shape {
		shape[i], obsDim = strconv.Itoa(d), obsDim*d
	}
	d := evaluator.Dims{ObsDim: obsDim, Actions: pc.meta.Action.N, Players: pc.meta.NumPlayers, MaxBatch: pc.model.MaxBatch}
	dir, env, remove, err := a.commandEnv(map[string]string{
		"TRAINYARD_OBS_SHAPE": strings.Join(shape, ","), "TRAINYARD_NUM_ACTIONS": strconv.Itoa(d.Actions), "TRAINYARD_NUM_PLAYERS": strconv.Itoa(d.Players),
	}, pc.gpus)
	if err != nil {
		return nil, err
	}
	s := &served{remove: remove, out: &procenv.Tail{Max: 4 << 10}}
	fail := func(err error) (*served, error) {
		s.Close()
		return nil, err
	}
	modelDir, sock := filepath.Join(dir, "model"), filepath.Join(dir, "eval.sock")
	if s.name, err = restoreModelDir(ctx, a.Store, pc.loopID, o.Key, modelDir); err != nil {
		return fail(err)
	}
	if s.name == "" {
		s.name = o.Name
	}
	env = append(env, "TRAINYARD_MODEL_DIR="+modelDir, "TRAINYARD_MODEL_NAME="+s.name, evaluatorSocketEnv+"="+sock)
	s.proc, err = procenv.Start(procenv.Command{Path: path, Args: cmd[1:], Env: env, Dir: dir, Stdout: s.out, Stderr: s.out, DieWithParent: true, User: a.User})
	if err != nil {
		return fail(temporal.NewNonRetryableApplicationError(fmt.Sprintf("model.evaluator: %v", err), ErrFailed, err))
	}
	deadline := time.Now().Add(evaluatorStart)
	for {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		s.remote, err = evaluator.Dial(dctx, sock, d)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-s.proc.Done():
			// A command that cannot start would not start on another node
			// either: the loop stops with its words.
			err := s.exited("before it served")
			return fail(temporal.NewNonRetryableApplicationError(err.Error(), ErrFailed, err))
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("model.evaluator serving %s: no answer on %s after %v: %v; its output: %s", s.name, sock, evaluatorStart, err, lastLines(s.out)))
		}
		activity.RecordHeartbeat(ctx)
	}
	s.Batcher = evaluator.NewBatcher(s.remote, 0)
	return s, nil
}

const evaluatorSocketEnv = "TRAINYARD_EVAL_SOCKET"

// exited is the evaluator's death as the loop's reason: its exit and its
// last lines. Not retried as such: the loop places the work again and
// counts it (maxFailures), so a model that always crashes ends the loop
// with this reason.
func (s *served) exited(when string) error {
	err := s.proc.Wait()
	return fmt.Errorf("model.evaluator serving %s exited %s (%v); its output: %s", s.name, when, err, lastLines(s.out))
}

func (s *served) Close() {
	if s.remote != nil {
		_ = s.remote.Close()
	}
	if s.proc != nil {
		_ = s.proc.Stop(5 * time.Second)
	}
	if s.remove != nil {
		s.remove()
	}
}

// lastLines is the end of a command's output on one line.
func lastLines(t *procenv.Tail) string {
	out := strings.TrimSpace(t.String())
	if out == "" {
		return "(nothing)"
	}
	lines := strings.Split(out, "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// trainUserModel runs the loop's trainer command on the training window
// and stores the directory it writes as the candidate.
func (a *AgentActivities) trainUserModel(ctx context.Context, in TrainInput) (TrainResult, error) {
	cmd := in.ModelCommands.Trainer
	path, err := lookPath(cmd, "trainer")
	if err != nil {
		return TrainResult{}, err
	}
	mod, err := a.module(ctx, in.GamePlugin)
	if err != nil {
		return TrainResult{}, err
	}
	players := mod.Metadata().NumPlayers
	mod.Close(context.WithoutCancel(ctx))
	dir, env, remove, err := a.commandEnv(nil, in.GPUs)
	if err != nil {
		return TrainResult{}, err
	}
	defer remove()
	var data []string
	for i, key := range in.Datasets {
		raw, err := get(ctx, a.Store, key)
		if err != nil {
			return TrainResult{}, err
		}
		p := filepath.Join(dir, "data", fmt.Sprintf("%02d-%s", i, filepath.Base(filepath.Dir(key))+".npz"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return TrainResult{}, err
		}
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			return TrainResult{}, err
		}
		data = append(data, p)
	}
	best := ""
	if isModelDir(in.FromKey) {
		best = filepath.Join(dir, "best")
		if _, err := restoreModelDir(ctx, a.Store, in.LoopID, in.FromKey, best); err != nil {
			return TrainResult{}, err
		}
	}
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return TrainResult{}, err
	}
	if a.User != nil {
		if err := os.Chown(out, int(a.User.UID), int(a.User.GID)); err != nil {
			return TrainResult{}, err
		}
	}
	env = append(env, "TRAINYARD_DATASETS="+strings.Join(data, ":"), "TRAINYARD_BEST_MODEL_DIR="+best, "TRAINYARD_OUTPUT_DIR="+out,
		"TRAINYARD_NUM_PLAYERS="+strconv.Itoa(players), "TRAINYARD_EPOCHS="+strconv.Itoa(in.Epochs), "TRAINYARD_SEED="+strconv.FormatUint(in.Seed, 10))
	tail := &procenv.Tail{Max: 4 << 10}
	p, err := procenv.Start(procenv.Command{Path: path, Args: cmd[1:], Env: env, Dir: dir, Stdout: tail, Stderr: tail, DieWithParent: true, User: a.User})
	if err != nil {
		return TrainResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("model.trainer: %v", err), ErrFailed, err)
	}
	beat := time.NewTicker(2 * time.Second)
	defer beat.Stop()
wait:
	for {
		select {
		case <-p.Done():
			break wait
		case <-ctx.Done():
			_ = p.Stop(5 * time.Second)
			return TrainResult{}, ctx.Err()
		case <-beat.C:
			activity.RecordHeartbeat(ctx)
		}
	}
	if err := p.Wait(); err != nil {
		return TrainResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("model.trainer for %s: %v; its output: %s", in.Model, err, lastLines(tail)), ErrFailed, err)
	}
	if ents, err := os.ReadDir(out); err != nil || len(ents) == 0 {
		return TrainResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("model.trainer for %s exited 0 but wrote nothing to TRAINYARD_OUTPUT_DIR; its output: %s", in.Model, lastLines(tail)), ErrFailed, nil)
	}
	m, _, err := modelDirs(a.Store, in.LoopID).SaveDir(ctx, fmt.Sprintf("gen-%06d", in.Generation), out, checkpoint.Meta{Labels: map[string]string{labelModel: in.Model}})
	if err != nil {
		return TrainResult{}, fmt.Errorf("store model %s: %w", in.Model, err)
	}
	return TrainResult{Model: in.Model, Key: modelDirKey(m)}, nil
}

// playCtx is what an activity's players are made from; close stops the
// evaluators it started.
type playCtx struct {
	meta    pluginhost.Metadata
	loopID  string
	model   *ModelCommands
	gpus    []int
	sims    int
	gumbel  bool // Gumbel root search (Settings.Search)
	servers []*served
}

func (pc *playCtx) close() {
	for _, s := range pc.servers {
		s.Close()
	}
}

// meanBatch is the mean positions per batch over the evaluators served
// so far (0: none).
func (pc *playCtx) meanBatch() float64 {
	var batches, positions int64
	for _, s := range pc.servers {
		b, p := s.Stats()
		batches, positions = batches+b, positions+p
	}
	if batches == 0 {
		return 0
	}
	return float64(positions) / float64(batches)
}

// explain names a dead evaluator as the cause of a failed game.
func (pc *playCtx) explain(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	// The socket may close a moment before the process is reaped.
	for end := time.Now().Add(time.Second); ; time.Sleep(50 * time.Millisecond) {
		for _, s := range pc.servers {
			select {
			case <-s.proc.Done():
				return s.exited("while serving")
			default:
			}
		}
		if len(pc.servers) == 0 || time.Now().After(end) {
			return err
		}
	}
}

// modelPlayer is MCTS guided by a served model.
type modelPlayer struct {
	*engine.MCTS
	s *served
}

// join counts a game in with the batchers of the models it plays, so each
// batch waits for it; the returned func counts it out.
func join(players ...engine.Player) func() {
	var bs []*evaluator.Batcher
	for _, p := range players {
		if m, ok := p.(modelPlayer); ok {
			m.s.Join()
			bs = append(bs, m.s.Batcher)
		}
	}
	return func() {
		for _, b := range bs {
			b.Leave()
		}
	}
}
