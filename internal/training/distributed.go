package training

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/sdk/go/envs"
)

// Distributed rollouts (spec rollout_workers > 0). S3 is the only channel
// between the trainer and its rollout workers (docs/training.md, "S3
// layout"):
//
//	runs/<run>/weights/<iteration>              policy version <iteration> (the trainer's Weights)
//	runs/<run>/weights/latest                   JSON BusHead: which version to act with next
//	runs/<run>/rollouts/<iteration>/<worker>    a worker's fragment for <iteration> (its actor's Collect)
//
// Each trainer session (a placement, a restore) has a fresh generation;
// weights and fragments carry it in their bus stamp, so nothing from
// before a restart is ever learnt from. What follows the stamp is the
// algorithm's (learner.Distributor): the bus never reads it.

// BusHead is the object runs/<run>/weights/latest.
type BusHead struct {
	Version    int64  `json:"version"`
	Generation string `json:"generation"`
	Key        string `json:"key"`
	// Done: the run ended; rollout workers return.
	Done bool `json:"done,omitempty"`
}

// Bus keys.
func busPrefix(run string) string { return "runs/" + run + "/" }

// WeightsKey is the object holding weight version it of run.
func WeightsKey(run string, it int64) string {
	return fmt.Sprintf("runs/%s/weights/%010d", run, it)
}

// HeadKey is the object naming the newest weights.
func HeadKey(run string) string { return "runs/" + run + "/weights/latest" }

// FragmentKey is worker's rollout for iteration it.
func FragmentKey(run string, it int64, worker int) string {
	return fmt.Sprintf("runs/%s/rollouts/%010d/%03d", run, it, worker)
}

// busStamp heads every weights and fragment object: which trainer session
// and weight version it belongs to, and (a fragment) which worker wrote it.
type busStamp struct {
	Generation string `json:"generation"`
	// Version is the weights' version; a fragment's, the version it was
	// acted with.
	Version int64 `json:"version"`
	Worker  int   `json:"worker,omitempty"`
}

const busMagic = "TYBUSv1\n"

// sealBus frames payload with its stamp: magic, uint32 stamp length, the
// stamp's JSON, payload (which checks itself).
func sealBus(st busStamp, payload []byte) []byte {
	hdr, _ := json.Marshal(st)
	b := make([]byte, 0, len(busMagic)+4+len(hdr)+len(payload))
	b = append(b, busMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(hdr)))
	b = append(b, hdr...)
	return append(b, payload...)
}

// openBus splits an object sealBus framed.
func openBus(b []byte) (busStamp, []byte, error) {
	var st busStamp
	if len(b) < len(busMagic)+4 || string(b[:len(busMagic)]) != busMagic {
		return st, nil, errors.New("not a rollout bus object")
	}
	p := len(busMagic)
	n := int64(binary.LittleEndian.Uint32(b[p:]))
	p += 4
	if n > int64(len(b)-p) {
		return st, nil, fmt.Errorf("bus stamp of %d bytes exceeds the object", n)
	}
	if err := json.Unmarshal(b[p:p+int(n)], &st); err != nil {
		return st, nil, fmt.Errorf("bus stamp: %w", err)
	}
	return st, b[p+int(n):], nil
}

// busPoll is how often a waiting side looks for the other's object.
const busPoll = 25 * time.Millisecond

// RolloutInput starts one rollout worker of a run.
type RolloutInput struct {
	RunID        string               `json:"run_id"`
	Spec         Spec                 `json:"spec"`
	EnvPlugin    string               `json:"env_plugin"`
	RewardPlugin string               `json:"reward_plugin,omitempty"`
	Endpoints    []inference.Endpoint `json:"endpoints,omitempty"`
	Worker       int                  `json:"worker"`
	// Start counts the worker's placements (its seed differs per start,
	// so a replacement does not replay its predecessor's episodes).
	Start int `json:"start"`
}

// RolloutStatus is a rollout worker's progress (its heartbeat details and
// result).
type RolloutStatus struct {
	Worker    int    `json:"worker"`
	Node      string `json:"node,omitempty"`
	Fragments int    `json:"fragments"`
	// WeightVersion is the version of the last fragment written.
	WeightVersion int64 `json:"weight_version"`
	Steps         int64 `json:"steps"`
}

func (r *Runner) bus() (*objstore.Store, error) {
	if r.Objects == nil {
		return nil, fmt.Errorf("distributed rollouts need the agent's S3 bucket: %w", ErrFatal)
	}
	return r.Objects, nil
}

func getObject(ctx context.Context, s *objstore.Store, key string) ([]byte, error) {
	b, _, err := getObjectTagged(ctx, s, key)
	return b, err
}

// getObjectTagged is getObject with the object's ETag.
func getObjectTagged(ctx context.Context, s *objstore.Store, key string) ([]byte, string, error) {
	o, err := s.Client.GetObject(ctx, s.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, "", err
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, "", errNoObject
		}
		return nil, "", err
	}
	info, err := o.Stat()
	if err != nil {
		return nil, "", err
	}
	return b, info.ETag, nil
}

var (
	errNoObject = errors.New("no such object")
	errDrained  = errors.New("node draining")
)

func putObject(ctx context.Context, s *objstore.Store, key string, b []byte) error {
	_, err := s.Client.PutObject(ctx, s.Bucket, key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{ContentType: "application/octet-stream"})
	return err
}

// deleteBus removes the run's bus objects under sub ("weights/",
// "rollouts/" or "") whose iteration keep does not accept (nil: all; the
// head is never removed here).
func deleteBus(ctx context.Context, s *objstore.Store, run, sub string, keep func(it int64) bool) error {
	prefix := busPrefix(run) + sub
	objs := make(chan minio.ObjectInfo)
	go func() {
		defer close(objs)
		for o := range s.Client.ListObjects(ctx, s.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if o.Err != nil {
				return
			}
			if o.Key == HeadKey(run) {
				continue
			}
			rest := strings.TrimPrefix(o.Key, busPrefix(run))
			parts := strings.Split(rest, "/")
			if len(parts) >= 2 && keep != nil {
				if it, err := strconv.ParseInt(parts[1], 10, 64); err == nil && keep(it) {
					continue
				}
			}
			select {
			case objs <- o:
			case <-ctx.Done():
				return
			}
		}
	}()
	for e := range s.Client.RemoveObjects(ctx, s.Bucket, objs, minio.RemoveObjectsOptions{}) {
		if e.Err != nil {
			return e.Err
		}
	}
	return ctx.Err()
}

// generation names one trainer session.
func generation() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// publish writes weights version v, then the head naming it.
func (s *session) publish(ctx context.Context, bus *objstore.Store, run string) error {
	version, _ := s.trainer.Counters()
	w, err := s.trainer.Weights()
	if err != nil {
		return fmt.Errorf("run %s: weights %d: %w", run, version, err)
	}
	key := WeightsKey(run, version)
	if err := putObject(ctx, bus, key, sealBus(busStamp{Generation: s.gen, Version: version}, w)); err != nil {
		return fmt.Errorf("run %s: publish weights %d: %w", run, version, err)
	}
	head, _ := json.Marshal(BusHead{Version: version, Generation: s.gen, Key: key})
	if err := putObject(ctx, bus, HeadKey(run), head); err != nil {
		return fmt.Errorf("run %s: publish weights %d: %w", run, version, err)
	}
	s.published = version
	return nil
}

// RunDistributedSegment is RunSegment for rollout_workers > 0: the
// learner steps no env; each iteration it publishes its weights, waits for
// every worker's fragment of the next iteration, and learns from them.
func (r *Runner) RunDistributedSegment(ctx context.Context, in SegmentInput, progress func(learner.Metrics)) (_ SegmentResult, err error) {
	defer func() { err = cutShort(ctx, err) }()
	var res SegmentResult
	spec := in.Spec
	if err := spec.Defaulted(); err != nil {
		return res, fmt.Errorf("run %s: %w", in.RunID, err)
	}
	bus, err := r.bus()
	if err != nil {
		return res, err
	}
	from, err := r.resume(ctx, in.RunID, in.Epoch)
	if err != nil {
		return res, err
	}
	s := r.take(in.RunID)
	if s != nil && (s.seq != in.FromCheckpoint || s.seq != from.Seq) {
		s.close()
		s = nil
	}
	if s == nil {
		if s, res, err = r.openTrainer(ctx, in, spec, from); err != nil {
			return res, err
		}
	}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	if s.published < 0 {
		// A new session: nothing on the bus from before it may be learnt
		// from, and workers must switch to this generation's weights.
		if err := deleteBus(ctx, bus, in.RunID, "", nil); err != nil {
			return res, fmt.Errorf("run %s: clear the rollout bus: %w", in.RunID, err)
		}
		if err := s.publish(ctx, bus, in.RunID); err != nil {
			return res, err
		}
	}

	var segment []learner.Metrics
	for range in.Iterations {
		it, _ := s.learner.Counters()
		if it >= int64(spec.Iterations) {
			break
		}
		if res.Drained = r.Drain.Reason(); res.Drained != "" {
			break
		}
		frags, err := r.gather(ctx, bus, in.RunID, s.gen, it, spec.RolloutWorkers)
		if errors.Is(err, errDrained) {
			res.Drained = r.Drain.Reason()
			break
		}
		if err != nil {
			return res, err
		}
		m, err := s.trainer.Learn(ctx, frags)
		if err != nil {
			return res, fmt.Errorf("run %s iteration %d: %w: %w", in.RunID, it+1, ErrFatal, err)
		}
		if err := s.publish(ctx, bus, in.RunID); err != nil {
			return res, err
		}
		// Version it and its fragments are spent.
		_ = deleteBusKeys(ctx, bus, WeightsKey(in.RunID, it), fragmentKeys(in.RunID, it+1, spec.RolloutWorkers)...)
		segment = append(segment, m)
		if progress != nil {
			progress(m)
		}
		if spec.Reached(m) {
			break
		}
	}
	saved, err := r.tally(ctx, in, spec, s, &res, segment, nil)
	if err != nil {
		return res, err
	}
	if saved {
		// Stragglers (fragments of a generation or iteration no longer
		// awaited) go with each checkpoint.
		_ = deleteBus(ctx, bus, in.RunID, "rollouts/", func(it int64) bool { return it > res.Iteration })
	}
	if res.Done {
		return res, r.endDistributed(ctx, bus, in.RunID, s, spec, &res)
	}
	if res.Drained != "" {
		return res, nil
	}
	ok = true
	r.put(in.RunID, s)
	return res, nil
}

// endDistributed tells the rollout workers the run ended, clears the bus
// and runs the final evaluation into res.
func (r *Runner) endDistributed(ctx context.Context, bus *objstore.Store, run string, s *session, spec Spec, res *SegmentResult) error {
	head, _ := json.Marshal(BusHead{Version: res.Iteration, Generation: s.gen, Done: true})
	if err := putObject(ctx, bus, HeadKey(run), head); err != nil {
		return fmt.Errorf("run %s: tell rollout workers it ended: %w", run, err)
	}
	_ = deleteBus(ctx, bus, run, "", nil)
	ev, err := r.evaluate(ctx, s, spec)
	if err != nil {
		return err
	}
	res.Eval = &ev
	return nil
}

func fragmentKeys(run string, it int64, workers int) []string {
	out := make([]string, workers)
	for w := range out {
		out[w] = FragmentKey(run, it, w)
	}
	return out
}

func deleteBusKeys(ctx context.Context, s *objstore.Store, first string, rest ...string) error {
	for _, k := range append([]string{first}, rest...) {
		if err := s.Client.RemoveObject(ctx, s.Bucket, k, minio.RemoveObjectOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// gather waits for every worker's fragment of iteration it+1 acted with
// this generation's version it. Fragments of another generation or version
// are stale (written by a worker that had not yet seen this session's
// weights): they are skipped, and the worker's next one awaited.
func (r *Runner) gather(ctx context.Context, bus *objstore.Store, run, gen string, it int64, workers int) ([][]byte, error) {
	frags := make([][]byte, workers)
	missing := workers
	// A stale fragment is left where it is: its worker overwrites it.
	// (Removing it raced that write: read stale, worker writes, remove,
	// and the trainer waited forever for a fragment its worker had
	// written.) Its ETag spares reading it again until it changes.
	stale := map[int]string{}
	t := time.NewTicker(busPoll)
	defer t.Stop()
	for {
		for w := range frags {
			if frags[w] != nil {
				continue
			}
			key := FragmentKey(run, it+1, w)
			if tag, ok := stale[w]; ok {
				if info, err := bus.Client.StatObject(ctx, bus.Bucket, key, minio.StatObjectOptions{}); err == nil && info.ETag == tag {
					continue
				}
			}
			b, tag, err := getObjectTagged(ctx, bus, key)
			if errors.Is(err, errNoObject) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("run %s: read %s: %w", run, key, err)
			}
			st, f, err := openBus(b)
			if err != nil || st.Generation != gen || st.Version != it || st.Worker != w {
				stale[w] = tag
				continue
			}
			frags[w] = f
			missing--
		}
		if missing == 0 {
			return frags, nil
		}
		if r.Drain.Reason() != "" {
			return nil, errDrained
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// openTrainer builds a trainer session: the env plugin (for its spec and
// the final evaluation) and a learner restored from the newest checkpoint,
// or a fresh one.
func (r *Runner) openTrainer(ctx context.Context, in SegmentInput, spec Spec, m checkpoint.Manifest) (*session, SegmentResult, error) {
	var res SegmentResult
	s := &session{gen: generation(), published: -1}
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
	if in.RewardPlugin != "" {
		rm, err := r.load(ctx, in.RewardPlugin, pluginhost.Grants{})
		if err != nil {
			return fail(err)
		}
		s.mods = append(s.mods, rm)
	}
	envSpec := envMod.Metadata().Spec()
	n := spec.LearnerEnvs()
	f, err := spec.distributed()
	if err != nil {
		return fail(fmt.Errorf("run %s: %w: %w", in.RunID, ErrFatal, err))
	}
	switch {
	case m.Seq == 0:
		if in.FromCheckpoint > 0 {
			return fail(fmt.Errorf("run %s: checkpoint %d was reported but none is in the bucket: %w", in.RunID, in.FromCheckpoint, ErrFatal))
		}
		k := spec.Knobs()
		if k.Imports, err = r.imports(ctx, spec); err != nil {
			return fail(err)
		}
		if s.trainer, err = f.NewTrainer(envSpec, n, k); err != nil {
			return fail(fmt.Errorf("run %s: %w: %w", in.RunID, ErrFatal, err))
		}
		s.learner = s.trainer
		return s, res, nil
	}
	if err := checkPlugins(m, in); err != nil {
		return fail(err)
	}
	files, err := r.readFiles(ctx, m, FileLearner, FileMetrics)
	if err != nil {
		return fail(err)
	}
	if s.trainer, err = f.RestoreTrainer(bytes.NewReader(files[FileLearner]), envSpec, n); err != nil {
		return fail(fmt.Errorf("run %s: restore checkpoint %d: %w: %w", in.RunID, m.Seq, ErrFatal, err))
	}
	s.learner = s.trainer
	s.seq, res.RestoredFrom = m.Seq, m.Seq
	if m.Seq > in.FromCheckpoint {
		var lost []learner.Metrics
		if err := json.Unmarshal(files[FileMetrics], &lost); err == nil {
			res.Metrics = lost
		}
	}
	return s, res, nil
}

// workerSeed gives each worker and each of its starts its own episodes.
func workerSeed(seed uint64, worker, start int) uint64 {
	x := seed ^ (uint64(worker+1) * 0x9E3779B97F4A7C15) ^ (uint64(start) * 0xBF58476D1CE4E5B9)
	x ^= x >> 31
	return x
}

// RunRollouts is one rollout worker: it loads the env plugin, then until
// the run ends acts with each new weight version the trainer publishes and
// writes the fragment. progress is called after every fragment.
func (r *Runner) RunRollouts(ctx context.Context, in RolloutInput, progress func(RolloutStatus)) (_ RolloutStatus, err error) {
	defer func() { err = cutShort(ctx, err) }()
	st := RolloutStatus{Worker: in.Worker, Node: r.Node, WeightVersion: -1}
	spec := in.Spec
	if err := spec.Defaulted(); err != nil {
		return st, fmt.Errorf("run %s: %w", in.RunID, err)
	}
	bus, err := r.bus()
	if err != nil {
		return st, err
	}
	seg := SegmentInput{RunID: in.RunID, Spec: spec, EnvPlugin: in.EnvPlugin, RewardPlugin: in.RewardPlugin, Endpoints: in.Endpoints}
	g, err := grants(seg)
	if err != nil {
		return st, err
	}
	envMod, err := r.load(ctx, in.EnvPlugin, g)
	if err != nil {
		return st, err
	}
	defer envMod.Close(context.Background())
	seed := workerSeed(spec.Seed, in.Worker, in.Start)
	venv, err := envMod.NewVecEnv(ctx, spec.EnvsPerWorker, seed)
	if err != nil {
		return st, fmt.Errorf("env plugin %s: %w", short(in.EnvPlugin), fatal(err))
	}
	defer venv.Close()
	var env envs.VecEnv = venv
	if in.RewardPlugin != "" {
		rm, err := r.load(ctx, in.RewardPlugin, pluginhost.Grants{})
		if err != nil {
			return st, err
		}
		defer rm.Close(context.Background())
		if env, err = pluginhost.Shape(ctx, venv, rm); err != nil {
			return st, fmt.Errorf("reward plugin %s: %w", short(in.RewardPlugin), fatal(err))
		}
	}
	f, err := spec.distributed()
	if err != nil {
		return st, fmt.Errorf("run %s: %w: %w", in.RunID, ErrFatal, err)
	}
	k := spec.Knobs()
	k.Seed = seed
	if k.Imports, err = r.imports(ctx, spec); err != nil {
		return st, err
	}
	actor, err := f.NewActor(env, k)
	if err != nil {
		return st, fmt.Errorf("run %s: %w: %w", in.RunID, ErrFatal, err)
	}
	var lastGen string
	lastVersion := int64(-1)
	t := time.NewTicker(busPoll)
	defer t.Stop()
	for {
		b, err := getObject(ctx, bus, HeadKey(in.RunID))
		var head BusHead
		if err == nil && json.Unmarshal(b, &head) == nil {
			if head.Done {
				return st, nil
			}
			if head.Generation != lastGen || head.Version != lastVersion {
				done, err := r.rolloutOnce(ctx, bus, in, actor, head, &st)
				if err != nil {
					return st, err
				}
				if done {
					lastGen, lastVersion = head.Generation, head.Version
					if progress != nil {
						progress(st)
					}
					continue // the trainer may already have published the next
				}
			}
		} else if err != nil && !errors.Is(err, errNoObject) && ctx.Err() == nil {
			return st, fmt.Errorf("run %s: read the weights head: %w", in.RunID, err)
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-t.C:
		}
	}
}

// rolloutOnce acts with the weights head names and writes the fragment;
// false when those weights are already gone (superseded).
func (r *Runner) rolloutOnce(ctx context.Context, bus *objstore.Store, in RolloutInput, actor learner.Actor, head BusHead, st *RolloutStatus) (bool, error) {
	b, err := getObject(ctx, bus, head.Key)
	if errors.Is(err, errNoObject) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("run %s: read %s: %w", in.RunID, head.Key, err)
	}
	ws, w, err := openBus(b)
	if err != nil {
		return false, fmt.Errorf("run %s: %s: %w", in.RunID, head.Key, err)
	}
	if ws.Generation != head.Generation || ws.Version != head.Version {
		return false, nil // the head moved on while we read
	}
	f, steps, err := actor.Collect(ctx, w, in.Worker, r.Node)
	if err != nil {
		return false, fmt.Errorf("run %s worker %d: %w", in.RunID, in.Worker, classify(err))
	}
	it := ws.Version + 1
	fb := sealBus(busStamp{Generation: ws.Generation, Version: ws.Version, Worker: in.Worker}, f)
	if err := putObject(ctx, bus, FragmentKey(in.RunID, it, in.Worker), fb); err != nil {
		return false, fmt.Errorf("run %s worker %d: write fragment %d: %w", in.RunID, in.Worker, it, err)
	}
	st.Fragments++
	st.WeightVersion = ws.Version
	st.Steps += steps
	return true, nil
}

// distributed is the spec's algorithm's distributed learner.
func (s Spec) distributed() (learner.Distributor, error) {
	a, _ := LookupAlgorithm(s.Algorithm)
	if d, ok := a.Learner.(learner.Distributor); ok {
		return d, nil
	}
	return nil, &FieldError{Field: "rollout_workers", Reason: fmt.Sprintf("algorithm %q has no distributed learner", s.Algorithm)}
}
