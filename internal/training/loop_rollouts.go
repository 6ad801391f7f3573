package training

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/rolloutworker"
	"github.com/trainyard/trainyard/internal/trajpool"
)

// LoopRolloutInput starts one rollout worker of a kind llm run.
type LoopRolloutInput struct {
	RunID     string               `json:"run_id"`
	Spec      Spec                 `json:"spec"`
	EnvPlugin string               `json:"env_plugin"`
	Endpoints []inference.Endpoint `json:"endpoints,omitempty"`
	// Worker of Workers: this worker plays episodes Worker, Worker +
	// Workers, ... (episode e is reset with seed spec.Seed + e).
	Worker  int `json:"worker"`
	Workers int `json:"workers"`
	// Pool is the trajectory pool's URL on the trainer's node.
	Pool string `json:"pool"`
}

// LoopWorkerStatus is a loop rollout worker's heartbeat.
type LoopWorkerStatus struct {
	Worker   int     `json:"worker"`
	Node     string  `json:"node,omitempty"`
	Episodes int64   `json:"episodes" doc:"Trajectories this placement put in the pool."`
	Replayed int64   `json:"replayed" doc:"Episodes replayed from their seed after a failed attempt (an endpoint timeout, a trap)."`
	Skipped  int64   `json:"skipped" doc:"Episodes a predecessor already delivered (from the pool's ledger), not played again."`
	PerSec   float64 `json:"per_sec" doc:"Trajectories per second over the last heartbeat."`
	Waiting  string  `json:"waiting,omitempty" doc:"Why episodes are not finishing: the endpoint or the pool is down or refusing."`
}

// RunLoopRollouts is one rollout worker of a kind llm run: it loads the env
// plugin with the run's endpoint grant and plays its share of episodes,
// max_concurrency at a time, into the pool until ctx ends. Episodes the
// pool already accepted (from a predecessor on another node) are skipped;
// an episode whose attempt fails is replayed from its seed, waiting with
// backoff while the endpoint is down, so nothing is lost or counted twice.
func (r *Runner) RunLoopRollouts(ctx context.Context, in LoopRolloutInput, beat func(LoopWorkerStatus)) (_ LoopWorkerStatus, err error) {
	defer func() { err = cutShort(ctx, err) }()
	st := LoopWorkerStatus{Worker: in.Worker, Node: r.Node}
	spec := in.Spec
	if err := spec.Defaulted(); err != nil {
		return st, fmt.Errorf("run %s: %w", in.RunID, err)
	}
	clients, err := endpointClients(in.RunID, spec.Capabilities.HTTP, in.Endpoints)
	if err != nil {
		return st, err
	}
	byName := map[string]*inference.Client{}
	for _, c := range clients {
		byName[c.Endpoint().Name] = c
	}
	// Heartbeats start first: loading the plugin and waiting for the
	// trajectory pool (its trainer may be moving) take longer than the
	// heartbeat timeout under load, and a worker that said nothing while it
	// waited was lost and placed again, 20 times over, failing the run.
	var waiting atomic.Pointer[string]
	live := &rolloutworker.Live{}
	var skipped atomic.Int64
	status := func(per float64) LoopWorkerStatus {
		s := st
		s.Episodes, s.Replayed, s.Skipped, s.PerSec = live.Episodes.Load(), live.Replayed.Load(), skipped.Load(), per
		if w := waiting.Load(); w != nil && *w != "" {
			s.Waiting = *w
		} else if e := live.LastError(); e != "" {
			s.Waiting = "episodes failing, replayed from their seeds: " + e
		}
		return s
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		v := time.NewTicker(time.Second)
		defer v.Stop()
		last, lastN := time.Now(), int64(0)
		for {
			select {
			case <-stop:
				return
			case <-v.C:
				followVersions(ctx, in.Pool, byName)
			case now := <-t.C:
				n := live.Episodes.Load()
				if beat != nil {
					beat(status(float64(n-lastN) / now.Sub(last).Seconds()))
				}
				last, lastN = now, n
			}
		}
	}()
	g := pluginhost.Grants{HTTP: pluginhost.NewHTTPGrant(in.RunID, byName, pluginhost.HTTPLimits{Rate: spec.Capabilities.HTTPRate, Burst: spec.Capabilities.HTTPBurst})}
	mod, err := r.loadWith(ctx, in.EnvPlugin, pluginhost.LoadOptions{Limits: pluginhost.Limits{PoolSize: spec.LLM.MaxConcurrency}}, g)
	if err != nil {
		return st, err
	}
	defer mod.Close(context.WithoutCancel(ctx))

	pool := &trajpool.Client{URL: in.Pool, Waiting: func(s string) { waiting.Store(&s) }}
	done, err := pool.Accepted(ctx)
	if err != nil {
		return st, err
	}
	workers := int64(max(in.Workers, 1))
	_, err = rolloutworker.Run(ctx, rolloutworker.Config{
		Name: fmt.Sprintf("rollout-%d", in.Worker), Module: mod, Concurrency: spec.LLM.MaxConcurrency,
		Episodes: math.MaxInt64 / workers, Seed: spec.Seed, Stride: workers, Offset: int64(in.Worker),
		Skip: func(e int64) bool {
			if done.Has(e) {
				skipped.Add(1)
				return true
			}
			return false
		},
		Pool: pool, MaxAttempts: -1, Live: live,
	})
	if err == nil {
		err = ctx.Err()
	}
	if ctx.Err() == nil {
		err = fmt.Errorf("%w: %w", ErrFatal, err)
	}
	return status(0), err
}

// followVersions sets each endpoint client's weight version to what the
// loop's trainer says its endpoint has loaded (VersionsPath); a failed
// poll changes nothing.
func followVersions(ctx context.Context, pool string, clients map[string]*inference.Client) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(pool, "/")+VersionsPath, nil)
	if err != nil {
		return
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer res.Body.Close()
	var v map[string]int64
	if res.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(res.Body, 1<<16)).Decode(&v) != nil {
		return
	}
	for name, version := range v {
		if c := clients[name]; c != nil {
			c.SetWeightVersion(version)
		}
	}
}
