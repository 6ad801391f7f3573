package training

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/trainyard/trainyard/internal/agent/drain"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// ErrFatal marks failures that retrying elsewhere cannot fix: a broken
// plugin, a checkpoint made with other plugins, a spec PPO refuses.
var ErrFatal = errors.New("training cannot continue")

// Files inside every checkpoint.
const (
	FileLearner = "learner.ckpt" // learner.Learner.Save: the algorithm's whole state (PPO: weights, Adam, normalisation, counters, RNG, env state)
	FileSpec    = "spec.json"    // the run spec and plugin hashes it was made with
	FileMetrics = "metrics.json" // per-iteration metrics since the previous checkpoint
)

// Checkpoint labels.
const (
	LabelEnv    = "env_sha256"
	LabelReward = "reward_sha256"
	LabelAlgo   = "algorithm"
	// MetricReturn is the retention and "best" metric: the mean return of
	// the last 100 episodes.
	MetricReturn = "mean_return"
)

// SegmentInput asks for the next few iterations of a run.
type SegmentInput struct {
	RunID        string `json:"run_id"`
	Spec         Spec   `json:"spec"`
	EnvPlugin    string `json:"env_plugin"`
	RewardPlugin string `json:"reward_plugin,omitempty"`
	// FromCheckpoint is the checkpoint the caller last saw complete (0:
	// none). A learner kept in memory continues only from exactly that
	// one; otherwise the run restores from the newest in S3.
	FromCheckpoint int64 `json:"from_checkpoint"`
	Iterations     int   `json:"iterations"`
	// Endpoints define the inference endpoints Spec.Capabilities grants.
	Endpoints []inference.Endpoint `json:"endpoints,omitempty"`
	// Epoch fences the run's checkpoints to this segment (checkpoint.Claim;
	// 0: unfenced).
	Epoch int64 `json:"epoch,omitempty"`
}

// SegmentResult is what a segment did.
type SegmentResult struct {
	// Metrics of every iteration completed since FromCheckpoint, including
	// ones a lost segment checkpointed but never reported.
	Metrics    []learner.Metrics `json:"metrics"`
	Checkpoint int64             `json:"checkpoint"`
	Iteration  int64             `json:"iteration"`
	Timesteps  int64             `json:"timesteps"`
	// RestoredFrom is the checkpoint the learner was restored from (0: it
	// continued in memory or started fresh).
	RestoredFrom int64   `json:"restored_from,omitempty"`
	MeanReturn   float64 `json:"mean_return"`
	Episodes     int     `json:"episodes"`
	// Done: the target return was reached or the iterations are used up;
	// Eval is then a deterministic evaluation of the final policy.
	Done bool                `json:"done"`
	Eval *learner.EvalResult `json:"eval,omitempty"`
	// Drained: the node is draining (the reason); the segment stopped early
	// with a checkpoint of its last iteration, to continue elsewhere.
	Drained string `json:"drained,omitempty"`
}

// Runner trains on one node. Between segments it keeps each run's learner
// and envs in memory, so episodes continue across checkpoints; after a
// crash or on another node it restores from S3.
type Runner struct {
	Plugins *pluginhost.Runtime
	Store   *pluginstore.Store
	// Modules, when set, serves the plugin modules instead of Store (a
	// local run: the built-ins the binary carries, a .wasm file).
	Modules ModuleSource
	// Checkpoints is where segments checkpoint; nil keeps none (a local
	// run without a checkpoint dir).
	Checkpoints *checkpoint.Store
	// IdleTTL drops learners whose run has not come back (default 30m).
	IdleTTL time.Duration
	// Drain, once started, ends segments early with a checkpoint of the
	// iteration just finished, so their run moves with nothing lost.
	Drain *drain.Signal
	// Objects is the bucket distributed rollouts exchange weights and
	// fragments through (distributed.go); Node names this node in them.
	Objects *objstore.Store
	Node    string
	// Address is the IP this node's peers reach it at (the agent's
	// advertised address): a gang's ranks bind their collectives to the
	// interface that holds it.
	Address string

	mu   sync.Mutex
	live map[string]*session
}

type session struct {
	learner learner.Learner
	// trainer is learner as a distributed trainer (distributed.go), nil
	// on a learner that steps its own envs.
	trainer learner.Trainer
	env     envs.VecEnv
	penv    *pluginhost.VecEnv // the env plugin under env (reward shaping may wrap it)
	mods    []*pluginhost.Module
	seq     int64
	used    time.Time
	// Distributed trainers: this session's generation and the weight
	// version it last published (-1: none yet).
	gen       string
	published int64
	// ahead trains the next segment's first iterations while a
	// checkpoint uploads (ahead.go).
	ahead *runAhead
}

func (s *session) close() {
	s.join()
	if c, ok := s.env.(io.Closer); ok {
		_ = c.Close()
	}
	for _, m := range s.mods {
		_ = m.Close(context.Background())
	}
}

// take removes a run's session (and any idle ones) from the cache.
func (r *Runner) take(run string) *session {
	r.mu.Lock()
	ttl := r.IdleTTL
	if ttl <= 0 {
		ttl = 30 * time.Minute
	}
	var expired []*session
	for id, s := range r.live {
		if time.Since(s.used) > ttl {
			expired = append(expired, s)
			delete(r.live, id)
		}
	}
	s := r.live[run]
	delete(r.live, run)
	r.mu.Unlock()
	// Closing waits for a run-ahead's iteration in flight: not under the lock.
	for _, e := range expired {
		e.close()
	}
	return s
}

// Close drops every in-memory learner, waiting for their run-aheads: an
// agent that stops, or a test whose plugin runtime closes next.
func (r *Runner) Close() {
	r.mu.Lock()
	live := r.live
	r.live = nil
	r.mu.Unlock()
	for _, s := range live {
		s.close()
	}
}

func (r *Runner) put(run string, s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live == nil {
		r.live = map[string]*session{}
	}
	s.used = time.Now()
	r.live[run] = s
}

// Forget drops a run's in-memory learner (a cancelled run).
func (r *Runner) Forget(run string) {
	if s := r.take(run); s != nil {
		s.close()
	}
}

// RunSegment trains up to in.Iterations iterations, then checkpoints.
// progress is called after every iteration (for heartbeats).
func (r *Runner) RunSegment(ctx context.Context, in SegmentInput, progress func(learner.Metrics)) (_ SegmentResult, err error) {
	defer func() { err = cutShort(ctx, err) }()
	var res SegmentResult
	spec := in.Spec
	if err := spec.Defaulted(); err != nil {
		return res, fmt.Errorf("run %s: %w", in.RunID, err)
	}
	// Claimed first: from here on no older placement's checkpoint can
	// become the run's, so the one to resume from stays the newest.
	from, err := r.resume(ctx, in.RunID, in.Epoch)
	if err != nil {
		return res, err
	}
	s := r.take(in.RunID)
	if s != nil && (s.seq != in.FromCheckpoint || s.seq != from.Seq) {
		s.close() // the caller never saw the checkpoint this state follows
		s = nil
	}
	if s == nil {
		if s, res, err = r.open(ctx, in, spec, from); err != nil {
			return res, err
		}
	}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()

	var segment []learner.Metrics
	ahead := s.join() // trained while the previous checkpoint uploaded
	for i := 0; i < in.Iterations || i < len(ahead); i++ {
		var st step
		if i < len(ahead) {
			st = ahead[i]
		} else {
			it, _ := s.learner.Counters()
			if it >= int64(spec.Iterations) {
				break
			}
			if res.Drained = r.Drain.Reason(); res.Drained != "" {
				break
			}
			st = s.step(ctx)
		}
		if s.penv != nil { // the iteration's plugin calls as one span under the segment's
			// At their real times: a run-ahead iteration's precede the segment.
			pluginhost.RecordSteps(ctx, st.calls, attribute.Int64("trainyard.training.iteration", st.iteration),
				attribute.Bool("trainyard.training.ahead", i < len(ahead)))
		}
		if st.err != nil {
			return res, fmt.Errorf("run %s iteration %d: %w", in.RunID, st.iteration, classify(st.err))
		}
		segment = append(segment, st.m)
		if progress != nil {
			progress(st.m)
		}
		if spec.Reached(st.m) {
			break
		}
	}
	// Once the checkpoint's bytes are taken, the next segment's iterations
	// train while they upload.
	next := func() {
		if !res.Done && res.Drained == "" {
			s.startAhead(r, spec, in.Iterations)
		}
	}
	if _, err := r.tally(ctx, in, spec, s, &res, segment, next); err != nil {
		return res, err
	}
	if res.Done {
		ev, err := r.evaluate(ctx, s, spec)
		if err != nil {
			return res, err
		}
		res.Eval = &ev
		return res, nil // ok stays false: the session is closed
	}
	if res.Drained != "" {
		return res, nil // ok stays false: the run continues on another node
	}
	ok = true
	r.put(in.RunID, s)
	return res, nil
}

// tally closes a segment's result (its metrics, the counters, whether the
// run is done) and saves the checkpoint that ends it when it ran any
// iteration (saved is then true); res.Checkpoint is the latest either way.
// uploading, when set, is called once the learner's state is taken and
// before it uploads: the learner is free from then on.
func (r *Runner) tally(ctx context.Context, in SegmentInput, spec Spec, s *session, res *SegmentResult, segment []learner.Metrics, uploading func()) (saved bool, err error) {
	res.Metrics = append(res.Metrics, segment...)
	res.Iteration, res.Timesteps = s.learner.Counters()
	if n := len(res.Metrics); n > 0 {
		last := res.Metrics[n-1]
		res.MeanReturn, res.Episodes = last.RecentReturnMean, last.RecentEpisodes
		res.Done = spec.Reached(last)
	}
	res.Done = res.Done || res.Iteration >= int64(spec.Iterations)
	if len(segment) > 0 && r.Checkpoints != nil {
		seq, err := r.save(ctx, in, spec, s.learner, segment, res.MeanReturn, uploading)
		if err != nil {
			return false, err
		}
		s.seq, saved = seq, true
	}
	res.Checkpoint = s.seq
	return saved, nil
}

// open builds the envs and a learner: restored from the newest checkpoint
// when there is one, fresh otherwise.
func (r *Runner) open(ctx context.Context, in SegmentInput, spec Spec, m checkpoint.Manifest) (*session, SegmentResult, error) {
	var res SegmentResult
	s := &session{}
	fail := func(err error) (*session, SegmentResult, error) {
		s.close()
		return nil, res, err
	}
	g, err := grants(in)
	if err != nil {
		return fail(err)
	}
	envMod, err := r.load(ctx, in.EnvPlugin, g)
	if err != nil {
		return fail(err)
	}
	s.mods = append(s.mods, envMod)
	// The envs outlive this activity's context (they stay cached); each
	// call still has the plugin's own deadline.
	venv, err := envMod.NewVecEnv(context.Background(), spec.NumEnvs(), spec.Seed)
	if err != nil {
		return fail(fmt.Errorf("env plugin %s: %w", short(in.EnvPlugin), fatal(err)))
	}
	s.env, s.penv = venv, venv
	if in.RewardPlugin != "" {
		rm, err := r.load(ctx, in.RewardPlugin, pluginhost.Grants{})
		if err != nil {
			return fail(err)
		}
		s.mods = append(s.mods, rm)
		shaped, err := pluginhost.Shape(context.Background(), venv, rm)
		if err != nil {
			return fail(fmt.Errorf("reward plugin %s: %w", short(in.RewardPlugin), fatal(err)))
		}
		s.env = shaped
	}

	f, err := spec.factory()
	if err != nil {
		return fail(fmt.Errorf("run %s: %w: %w", in.RunID, ErrFatal, err))
	}
	env := learner.Env{Train: s.env, Open: s.openEnv}
	switch {
	case m.Seq == 0:
		if in.FromCheckpoint > 0 {
			return fail(fmt.Errorf("run %s: checkpoint %d was reported but none is in the bucket: %w", in.RunID, in.FromCheckpoint, ErrFatal))
		}
		k := spec.Knobs()
		if k.Imports, err = r.imports(ctx, spec); err != nil {
			return fail(fmt.Errorf("run %s: %w", in.RunID, err))
		}
		if s.learner, err = f.New(env, k); err != nil {
			return fail(fmt.Errorf("run %s: %w: %w", in.RunID, ErrFatal, err))
		}
		return s, res, nil
	}
	if err := checkPlugins(m, in); err != nil {
		return fail(err)
	}
	files, err := r.readFiles(ctx, m, FileLearner, FileMetrics)
	if err != nil {
		return fail(err)
	}
	if s.learner, err = f.Restore(bytes.NewReader(files[FileLearner]), env); err != nil {
		return fail(fmt.Errorf("run %s: restore checkpoint %d: %w: %w", in.RunID, m.Seq, ErrFatal, err))
	}
	s.seq, res.RestoredFrom = m.Seq, m.Seq
	if m.Seq > in.FromCheckpoint {
		// A segment checkpointed and then was lost before it reported:
		// its iterations are not lost, hand their metrics on.
		var lost []learner.Metrics
		if err := json.Unmarshal(files[FileMetrics], &lost); err == nil {
			res.Metrics = lost
		}
	}
	return s, res, nil
}

// openEnv makes n fresh envs of the session's plugins (the env, shaped by
// the reward plugin when there is one), reset with seed: evaluations.
func (s *session) openEnv(ctx context.Context, n int, seed uint64) (envs.VecEnv, error) {
	venv, err := s.mods[0].NewVecEnv(ctx, n, seed)
	if err != nil {
		return nil, err
	}
	if len(s.mods) < 2 {
		return venv, nil
	}
	shaped, err := pluginhost.Shape(ctx, venv, s.mods[1])
	if err != nil {
		venv.Close()
		return nil, err
	}
	return shaped, nil
}

// checkPlugins refuses a checkpoint made with other plugin bytes: the
// weights would silently mean something else.
func checkPlugins(m checkpoint.Manifest, in SegmentInput) error {
	if got := m.Meta.Labels[LabelEnv]; got != in.EnvPlugin {
		return fmt.Errorf("run %s: checkpoint %d was made with env plugin %s, this run uses %s: %w",
			in.RunID, m.Seq, short(got), short(in.EnvPlugin), ErrFatal)
	}
	if got := m.Meta.Labels[LabelReward]; got != in.RewardPlugin {
		return fmt.Errorf("run %s: checkpoint %d was made with reward plugin %q, this run uses %q: %w",
			in.RunID, m.Seq, short(got), short(in.RewardPlugin), ErrFatal)
	}
	return nil
}

func (r *Runner) load(ctx context.Context, sha string, g pluginhost.Grants) (*pluginhost.Module, error) {
	return r.loadWith(ctx, sha, pluginhost.LoadOptions{}, g)
}

func (r *Runner) loadWith(ctx context.Context, sha string, o pluginhost.LoadOptions, g pluginhost.Grants) (*pluginhost.Module, error) {
	wasm, err := r.module(ctx, sha)
	if err != nil {
		if errors.Is(err, pluginstore.ErrNotFound) {
			return nil, fmt.Errorf("%w: %w", ErrFatal, err)
		}
		return nil, err
	}
	m, err := r.Plugins.LoadGranted(ctx, wasm, o, g)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", short(sha), fatal(err))
	}
	return m, nil
}

// readFiles restores the named files of a checkpoint (checksums verified)
// and returns their bytes; a file the checkpoint lacks is absent.
func (r *Runner) readFiles(ctx context.Context, m checkpoint.Manifest, names ...string) (map[string][]byte, error) {
	return readFiles(ctx, r.Checkpoints, m, names...)
}

// readFiles reads the files names of checkpoint m from store.
func readFiles(ctx context.Context, store *checkpoint.Store, m checkpoint.Manifest, names ...string) (map[string][]byte, error) {
	dir, err := os.MkdirTemp("", "trainyard-restore-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	keep := map[string]bool{}
	for _, n := range names {
		keep[n] = true
	}
	sub := m
	sub.Files = nil
	for _, f := range m.Files {
		if keep[f.Path] {
			sub.Files = append(sub.Files, f)
		}
	}
	if err := store.RestoreManifest(ctx, sub, dir); err != nil {
		if errors.Is(err, checkpoint.ErrChecksum) || errors.Is(err, checkpoint.ErrMissingChunk) {
			return nil, fmt.Errorf("%w: %w", ErrFatal, err)
		}
		return nil, err
	}
	out := map[string][]byte{}
	for _, f := range sub.Files {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			return nil, err
		}
		out[f.Path] = b
	}
	if _, ok := out[FileLearner]; !ok && keep[FileLearner] {
		return nil, fmt.Errorf("run %s checkpoint %d has no %s: %w", m.Run, m.Seq, FileLearner, ErrFatal)
	}
	return out, nil
}

// save writes the learner's whole state, the spec and the segment's
// metrics as one checkpoint (manifest last), then applies retention.
func (r *Runner) save(ctx context.Context, in SegmentInput, spec Spec, l learner.Learner, segment []learner.Metrics, meanReturn float64, uploading func()) (int64, error) {
	var ckpt bytes.Buffer
	if err := l.Save(&ckpt); err != nil {
		return 0, err
	}
	it, ts := l.Counters()
	if uploading != nil {
		uploading()
	}
	specJSON, _ := json.MarshalIndent(struct {
		Spec         Spec   `json:"spec"`
		EnvPlugin    string `json:"env_plugin"`
		RewardPlugin string `json:"reward_plugin,omitempty"`
	}{spec, in.EnvPlugin, in.RewardPlugin}, "", "  ")
	if segment == nil {
		segment = []learner.Metrics{}
	}
	metricsJSON, _ := json.Marshal(segment)
	m, _, err := r.Checkpoints.Save(ctx, in.RunID, map[string]io.Reader{
		FileLearner: &ckpt, FileSpec: bytes.NewReader(specJSON), FileMetrics: bytes.NewReader(metricsJSON),
	}, checkpoint.Meta{
		Iteration: it,
		Metrics:   map[string]float64{MetricReturn: meanReturn, "timesteps": float64(ts)},
		Labels:    map[string]string{LabelEnv: in.EnvPlugin, LabelReward: in.RewardPlugin, LabelAlgo: spec.Algorithm},
		Epoch:     in.Epoch,
	})
	if err != nil {
		return 0, fmt.Errorf("run %s: checkpoint at iteration %d: %w", in.RunID, it, err)
	}
	if _, err := r.Checkpoints.Prune(ctx, in.RunID, checkpoint.Retention{
		KeepLast: spec.KeepCheckpoints, KeepBestBy: MetricReturn, HigherIsBetter: true,
	}); err != nil {
		return 0, fmt.Errorf("run %s: retention: %w", in.RunID, err)
	}
	return m.Seq, nil
}

// evaluate runs the final policy deterministically on fresh envs: 10
// episodes, or a multi-agent env's 100 games on 10 at a time (an
// episode per agent each; a shared reward's score needs more than a few).
func (r *Runner) evaluate(ctx context.Context, s *session, spec Spec) (learner.EvalResult, error) {
	n, episodes := min(spec.NumEnvs(), 10), 10
	if a := len(s.mods[0].Metadata().Agents); a > 0 {
		n, episodes = 10*a, 100*a
	}
	env, err := s.openEnv(ctx, n, spec.Seed^0xE7A1)
	if err != nil {
		return learner.EvalResult{}, fmt.Errorf("evaluate: %w", err)
	}
	defer env.Close()
	return s.learner.Evaluate(ctx, env, spec.Seed^0xE7A1, episodes)
}

// classify marks plugin failures (trap, timeout, out of memory) fatal:
// the same plugin would fail the same way on any node. A call cut short by
// the activity's cancellation is not the plugin's failure, whatever it is
// wrapped in (a kill -9 of dev cancelled a rollout worker while it loaded
// its plugin, and the loop failed on "invalid plugin: ... context
// canceled"): another attempt decides.
func classify(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	for _, e := range []error{pluginhost.ErrTrap, pluginhost.ErrTimeout, pluginhost.ErrOutOfMemory, pluginhost.ErrGuestFault, pluginhost.ErrProtocol, pluginhost.ErrInvalidPlugin} {
		if errors.Is(err, e) {
			return fmt.Errorf("%w: %w", ErrFatal, err)
		}
	}
	return err
}

// cutShort says a call that failed after its context ended was cancelled,
// whatever the piece it was in reported: a rollout worker cancelled while
// it wrote a fragment got minio's request error, which need not wrap
// context.Canceled, and its activity failed as if S3 had.
func cutShort(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w (%v)", ctx.Err(), err)
}

// fatal marks err fatal, as a plugin that fails to load or start would
// fail on any node, unless the activity's cancellation cut it short (see
// classify): a rollout worker cancelled while it validated its plugin
// failed its whole run on "invalid plugin: ... abi_version: context
// canceled".
func fatal(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrFatal, err)
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
