package training

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trainyard/trainyard/internal/agent/procenv"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/trajpool"
	"github.com/trainyard/trainyard/internal/weightsync"
)

// LabelLedger is the checkpoint label of a loop's settled episodes (a
// trajpool.Ledger as JSON): the episodes the checkpoint's weights learnt
// from, or that were dropped. A restored loop seeds its pool with them;
// its rollout workers play every other episode again.
const LabelLedger = "loop_episodes"

// VersionsPath, beside the pool's API on the trainer's node, answers the
// weight version each endpoint confirmed loading ({"llm": 6}). Rollout
// workers on other nodes poll it, so each inference call records the
// version its endpoint served: never one it had not loaded yet, at worst
// (for a second after a reload) the one before.
const VersionsPath = "/v1/endpoint-versions"

// LoopTrainerInput starts (or restarts) a loop's trainer side on its node:
// the trajectory pool, weight sync and the trainer.
type LoopTrainerInput struct {
	RunID     string               `json:"run_id"`
	Spec      Spec                 `json:"spec"`
	GPUs      []int                `json:"gpus"`
	Endpoints []inference.Endpoint `json:"endpoints,omitempty"`
	// Port is where the pool listens (all interfaces): rollout workers on
	// other nodes put trajectories there.
	Port int `json:"port"`
	// PoolPath is the path the pool serves under (/placement/EPOCH; empty
	// in histories from before it): a rollout worker of a superseded
	// trainer still holds the old path, so it is refused even where this
	// trainer listens at the address and port its predecessor had.
	PoolPath string `json:"pool_path,omitempty"`
	// Epoch fences the run's checkpoints to this trainer (checkpoint.Claim).
	Epoch int64     `json:"epoch,omitempty"`
	Dir   string    `json:"-"`
	Env   []string  `json:"-"`
	Log   io.Writer `json:"-"`
}

// LoopStatus is a loop trainer's heartbeat and result.
type LoopStatus struct {
	Step       int64    `json:"step" doc:"Trainer steps done (restored ones included)."`
	Steps      int64    `json:"steps"`
	Loss       *float64 `json:"loss,omitempty" doc:"The loss the trainer reported for its last step."`
	Checkpoint int64    `json:"checkpoint" doc:"The newest published checkpoint: the weight version the endpoints were told to load."`
	Restored   int64    `json:"restored,omitempty" doc:"Checkpoint the loop restarted from."`
	// TrajectoriesPerSec: trajectories the pool accepted per second over
	// the last heartbeat; in the trainer's result, over its whole life.
	TrajectoriesPerSec float64            `json:"trajectories_per_sec"`
	Pool               PoolStatus         `json:"pool"`
	Endpoints          []EndpointVersion  `json:"endpoints,omitempty"`
	Output             string             `json:"output,omitempty" doc:"The last lines the trainer printed."`
	Drained            string             `json:"drained,omitempty"`
	Published          []PublishedVersion `json:"published,omitempty" doc:"The newest publishes, oldest first (at most 20)."`
}

// PoolStatus is the trajectory pool's state.
type PoolStatus struct {
	Depth          int     `json:"depth"`
	Capacity       int     `json:"capacity"`
	Put            int64   `json:"put"`
	Taken          int64   `json:"taken"`
	Dropped        int64   `json:"dropped" doc:"Evicted when full (drop_oldest)."`
	Superseded     int64   `json:"superseded,omitempty" doc:"Requests refused from rollout workers of a superseded trainer (an earlier placement, cut off or late)."`
	Stale          int64   `json:"stale" doc:"Discarded at batch time for a lag over max_lag."`
	Duplicates     int64   `json:"duplicates" doc:"Puts of an episode already accepted (a replay after a crash, a retried put): not counted again."`
	BlockedPuts    int64   `json:"blocked_puts"`
	BlockedSeconds float64 `json:"blocked_seconds" doc:"Time rollout workers waited for room (back-pressure)."`
	// Lag[i] counts taken trajectories i versions behind the trainer (the
	// last bucket: that many or more).
	Lag    []int64 `json:"lag" doc:"Off-policy lag distribution of taken trajectories: lag[i] were i versions behind; the last bucket counts that many or more."`
	MaxLag int64   `json:"max_lag"`
}

// EndpointVersion is the weight version an endpoint serves.
type EndpointVersion struct {
	Name    string `json:"name"`
	Version int64  `json:"version" doc:"The version it confirmed loading last (0: the weights it started with)."`
	Error   string `json:"error,omitempty" doc:"Why its last reload failed."`
}

// PublishedVersion is one weight publish.
type PublishedVersion struct {
	Version  int64   `json:"version"`
	Step     int64   `json:"step"`
	Seconds  float64 `json:"seconds"`
	Uploaded int64   `json:"uploaded_bytes"`
}

// poolServer serves the pool and the endpoints' weight versions under
// path; a request under any other path (a rollout worker of a superseded
// trainer) is refused with 409 and counted in superseded.
func poolServer(pool *trajpool.Pool, clients []*inference.Client, path string, superseded *atomic.Int64) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", trajpool.Handler(pool, 0))
	mux.HandleFunc("GET "+VersionsPath, func(w http.ResponseWriter, _ *http.Request) {
		v := map[string]int64{}
		for _, c := range clients {
			v[c.Endpoint().Name] = c.WeightVersion()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	})
	if path == "" {
		return mux
	}
	inner := http.StripPrefix(path, mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, path); !ok || !strings.HasPrefix(rest, "/") {
			superseded.Add(1)
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(map[string]any{"title": "Conflict", "status": http.StatusConflict,
				"detail": "this trajectory pool serves " + path + ": the request came for " + r.URL.Path + ", from a rollout worker of a superseded trainer"})
			return
		}
		inner.ServeHTTP(w, r)
	})
}

// RunLoopTrainer runs the trainer side of a kind llm run until its last
// step is published. It restores the newest checkpoint into the trainer's
// dir (its ledger into the pool), serves the pool on in.Port, and feeds the
// trainer one batch per step; every sync_every steps the dir is published:
// saved as the next checkpoint (the weight version), with the pool's
// settled episodes, and each granted endpoint is told to load it. A
// cancelled ctx or a drain publishes the last whole step first.
func (r *Runner) RunLoopTrainer(ctx context.Context, in LoopTrainerInput, beat func(LoopStatus)) (LoopStatus, error) {
	spec := in.Spec
	if err := spec.Defaulted(); err != nil {
		return LoopStatus{}, fmt.Errorf("run %s: %w", in.RunID, err)
	}
	loop := *spec.LLM
	st := LoopStatus{Steps: loop.Steps}
	dir := filepath.Join(in.Dir, "runs", in.RunID, "checkpoint")
	if err := os.RemoveAll(dir); err != nil {
		return st, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return st, err
	}
	var settled trajpool.Ledger
	m, err := r.resume(ctx, in.RunID, in.Epoch)
	if err != nil {
		return st, err
	}
	if m.Seq > 0 {
		if err := r.Checkpoints.RestoreManifest(ctx, m, dir); err != nil {
			return st, fmt.Errorf("run %s: restore checkpoint %d: %w", in.RunID, m.Seq, err)
		}
		if err := json.Unmarshal([]byte(m.Meta.Labels[LabelLedger]), &settled); err != nil {
			return st, fmt.Errorf("run %s: checkpoint %d: %w: %w", in.RunID, m.Seq, ErrFatal, err)
		}
		st.Step, st.Checkpoint, st.Restored = m.Meta.Iteration, m.Seq, m.Seq
	}
	began := time.Now()
	pool, err := trajpool.New(trajpool.Options{Name: in.RunID, Capacity: loop.PoolCapacity, Policy: trajpool.Policy(loop.PoolPolicy),
		MaxLag: loop.MaxLag, Dedup: true, Accepted: settled})
	if err != nil {
		return st, fmt.Errorf("%w: %w", ErrFatal, err)
	}
	pool.SetWeightVersion(st.Checkpoint)
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(in.Port))
	if err != nil {
		return st, fmt.Errorf("run %s: trajectory pool: %w", in.RunID, err)
	}
	defer ln.Close()
	clients, err := endpointClients(in.RunID, spec.Capabilities.HTTP, in.Endpoints)
	if err != nil {
		return st, err
	}
	var superseded atomic.Int64
	srv := &http.Server{Handler: poolServer(pool, clients, in.PoolPath, &superseded), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	defer pool.Close()

	for _, c := range clients {
		c.SetWeightVersion(st.Checkpoint) // what the endpoints were last told to load
	}
	syncer := &weightsync.Syncer{Store: r.Checkpoints, Run: in.RunID, Endpoints: clients}
	if r.Objects != nil {
		syncer.Bucket = r.Objects.Bucket
	}

	out := &procenv.Tail{Max: 16 << 10}
	var logged io.Writer = out
	if in.Log != nil {
		logged = io.MultiWriter(out, in.Log)
	}
	curves := r.commandScalars(in.RunID, out)
	var trainer stepper
	if loop.Remote != nil {
		if trainer, err = newRemoteStepper(loop.Remote, in.Endpoints, dir); err != nil {
			return st, err
		}
	} else {
		env, err := procenv.Build(in.Env, procenv.Spec{GPUs: in.GPUs, Extra: map[string]string{
			EnvCheckpointDir: dir, EnvRunID: in.RunID, EnvLoopStep: strconv.FormatInt(st.Step, 10)}})
		if err != nil {
			return st, fmt.Errorf("%w: %w", ErrFatal, err)
		}
		path, err := exec.LookPath(spec.Command[0])
		if err != nil {
			return st, fmt.Errorf("run %s: command %q: %v: %w", in.RunID, spec.Command[0], err, ErrFatal)
		}
		w := io.MultiWriter(logged, curves)
		if trainer, err = startProcessStepper(procenv.Command{Path: path, Args: spec.Command[1:], Env: env, Dir: filepath.Dir(dir),
			Stdout: w, Stderr: w, DieWithParent: true}, out, curves); err != nil {
			return st, fmt.Errorf("run %s: %w: %w", in.RunID, ErrFatal, err)
		}
	}
	defer trainer.stop()

	var mu sync.Mutex // guards st against the heartbeat
	endpointErr := map[string]string{}
	snapshot := func() LoopStatus {
		mu.Lock()
		defer mu.Unlock()
		ps := pool.Stats()
		st.Pool = PoolStatus{Depth: ps.Depth, Capacity: loop.PoolCapacity, Put: ps.Put, Taken: ps.Taken, Dropped: ps.Dropped, Stale: ps.Stale,
			Duplicates: ps.Duplicates, BlockedPuts: ps.BlockedPuts, BlockedSeconds: ps.BlockedTime.Seconds(), Lag: ps.Lag[:], MaxLag: ps.MaxLag,
			Superseded: superseded.Load()}
		st.Endpoints = make([]EndpointVersion, 0, len(clients)) // a fresh slice: earlier snapshots are being sent
		for _, c := range clients {
			st.Endpoints = append(st.Endpoints, EndpointVersion{Name: c.Endpoint().Name, Version: c.WeightVersion(), Error: endpointErr[c.Endpoint().Name]})
		}
		st.Output = out.String()
		return st
	}
	published := st.Step
	// publish makes the dir, as of step, the next weight version. Only a
	// failed upload is an error: an endpoint that refuses keeps serving
	// its version, with the reason shown, and gets the next one.
	publish := func(ctx context.Context, step int64) error {
		curves.flush(ctx)
		ledger, err := json.Marshal(pool.Settled())
		if err != nil {
			return err
		}
		start := time.Now()
		p, err := syncer.Publish(ctx, dir, checkpoint.Meta{Iteration: step, Labels: map[string]string{LabelAlgo: AlgorithmLLM, LabelLedger: string(ledger)}, Epoch: in.Epoch})
		if p.Version == 0 {
			return fmt.Errorf("run %s: publish step %d: %w", in.RunID, step, err)
		}
		pool.SetWeightVersion(p.Version)
		mu.Lock()
		st.Checkpoint, published = p.Version, step
		st.Published = append(st.Published, PublishedVersion{Version: p.Version, Step: step, Seconds: time.Since(start).Seconds(), Uploaded: p.Uploaded})
		if n := len(st.Published); n > 20 {
			st.Published = st.Published[n-20:]
		}
		clear(endpointErr)
		for _, f := range p.Failed {
			name, why, _ := strings.Cut(f, ": ")
			endpointErr[name] = why
		}
		mu.Unlock()
		// The newest publish and one before it are kept: a restore needs one.
		if _, err := r.Checkpoints.Prune(ctx, in.RunID, checkpoint.Retention{KeepLast: max(spec.KeepCheckpoints, 2)}); err != nil {
			return fmt.Errorf("run %s: retention: %w", in.RunID, err)
		}
		return nil
	}

	beats := make(chan struct{})
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		last, lastPut := time.Now(), pool.Stats().Put
		for {
			select {
			case <-beats:
				return
			case now := <-t.C:
				s := snapshot()
				mu.Lock()
				st.TrajectoriesPerSec = float64(s.Pool.Put-lastPut) / now.Sub(last).Seconds()
				s.TrajectoriesPerSec = st.TrajectoriesPerSec
				mu.Unlock()
				last, lastPut = now, s.Pool.Put
				if beat != nil {
					beat(s)
				}
			}
		}
	}()
	defer close(beats)

	// stopped publishes the last whole step when the trainer is between
	// steps (a step in flight may have half-written its dir).
	stopped := func(between bool) {
		trainer.stop()
		if between && st.Step > published {
			if err := publish(context.WithoutCancel(ctx), st.Step); err != nil {
				fmt.Fprintf(out, "trainyard: last publish failed: %v\n", err)
			}
		}
	}
	type stepDone struct {
		r    StepResult
		err  error
		sent bool // the batch reached the trainer
	}
	for st.Step < loop.Steps {
		bctx, cancel := context.WithCancel(ctx)
		done := make(chan stepDone, 1)
		go func() {
			defer cancel()
			b, err := pool.Batch(bctx, loop.Batch)
			if err != nil {
				done <- stepDone{err: err}
				return
			}
			mu.Lock()
			next := Batch{Step: st.Step + 1, WeightVersion: st.Checkpoint, Trajectories: b}
			mu.Unlock()
			res, err := trainer.step(bctx, next)
			done <- stepDone{res, err, true}
		}()
		var d stepDone
		drained := false
		select {
		case d = <-done:
		case <-r.Drain.Done():
			cancel()
			d, drained = <-done, true
		}
		if d.err == nil {
			mu.Lock()
			st.Step, st.Loss = d.r.Step, d.r.Loss
			mu.Unlock()
		}
		switch {
		case drained:
			stopped(d.err == nil || !d.sent)
			st.Drained = r.Drain.Reason()
			return snapshot(), nil
		case d.err != nil && ctx.Err() != nil:
			stopped(!d.sent)
			return snapshot(), ctx.Err()
		case d.err != nil:
			stopped(false)
			return snapshot(), fmt.Errorf("run %s: step %d: %w", in.RunID, st.Step+1, d.err)
		}
		if d.r.Loss != nil {
			curves.add(d.r.Step, "loss", *d.r.Loss)
		}
		if st.Step%loop.SyncEvery == 0 || st.Step == loop.Steps {
			if err := publish(ctx, st.Step); err != nil {
				stopped(false)
				return snapshot(), err
			}
		}
	}
	if err := trainer.finish(ctx); err != nil {
		return snapshot(), fmt.Errorf("run %s: %w", in.RunID, err)
	}
	final := snapshot()
	if secs := time.Since(began).Seconds(); secs > 0 {
		final.TrajectoriesPerSec = float64(final.Pool.Put) / secs
	}
	return final, nil
}
