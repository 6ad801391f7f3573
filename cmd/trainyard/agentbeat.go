package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/trainyard/trainyard/internal/resources"
	"github.com/trainyard/trainyard/workflows/cluster"
)

// heartbeater tells a node's cluster what changed on the node, with a
// signed heartbeat signal: on registration, when its resources, drain,
// address or agent process change, and whenever it holds no lease (the
// node was declared Dead, the cluster came up again, or the control plane
// is an older one that hands out none, and judges nodes by these signals).
// A beat that changes nothing is no signal: liveness is the lease's
// (workflows/cluster/lease.go), GPU utilisation a metric.
type heartbeater struct {
	tc          client.Client
	cluster     string
	secrets     agentSecrets
	lease       *cluster.LeaseHolder
	every       time.Duration
	maxRefusals int
	log         *slog.Logger
	hb          cluster.Heartbeat
	// refresh reads what may change between beats: GPU utilisation and
	// the drain reason.
	refresh func(context.Context) (gpuUtil []int, draining string)

	sent  *report // what the cluster last heard, nil: tell it
	check int     // beats left to ask whether the cluster refused the last signal
	// fails counts signals in a row not delivered; until retryAt the agent
	// sends none (a cluster at its limits is not sent a fleet's every beat).
	fails   int
	retryAt time.Time
	// unleased counts signals delivered before any lease was held.
	unleased int
}

// report is what a heartbeat says that the cluster acts on: of GPU
// utilisation, which GPUs are busy (cluster.GPUBusyPct).
type report struct {
	Resources resources.Capacity
	Draining  string
	Address   string
	PID       int
	GPUsBusy  []bool
}

func (b *heartbeater) report() report {
	r := report{Resources: b.hb.Resources, Draining: b.hb.Draining, Address: b.hb.Address, PID: b.hb.PID}
	for _, u := range b.hb.GPUUtil {
		r.GPUsBusy = append(r.GPUsBusy, u >= cluster.GPUBusyPct)
	}
	return r
}

// beat signals the cluster if something changed or no lease is held, and
// learns whether the cluster refuses it: an error once it refused
// maxRefusals of them.
func (b *heartbeater) beat(ctx context.Context) error {
	b.hb.GPUUtil, b.hb.Draining = b.refresh(ctx)
	r := b.report()
	if b.sent != nil && reflect.DeepEqual(*b.sent, r) && !b.lease.Lacking(b.patience()) {
		return b.refusal(ctx)
	}
	if time.Now().Before(b.retryAt) {
		return nil
	}
	b.secrets.sign(&b.hb, time.Now().UnixNano())
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.tc.SignalWorkflow(sctx, cluster.WorkflowID(b.cluster), "", cluster.SignalHeartbeat, b.hb); err != nil {
		if ctx.Err() == nil {
			b.log.Warn("heartbeat not delivered", "err", err, "failures", b.fails+1)
		}
		b.fails++
		b.retryAt = time.Now().Add(backoff(b.every, b.fails))
		return nil
	}
	b.sent, b.check, b.fails, b.retryAt = &r, 2, 0, time.Time{}
	if !b.lease.Ever() {
		b.unleased++
	}
	b.lease.Reset()
	return b.refusal(ctx)
}

// backoff is how long an agent waits to signal again after fails
// undelivered signals in a row: a beat, doubling up to 4, jittered by ±25%
// so that a fleet turned away at once does not come back at once.
func backoff(every time.Duration, fails int) time.Duration {
	d := every << min(fails-1, 2)
	return d*3/4 + rand.N(d/2+1)
}

// patience is how long the agent goes without a lease before it tells the
// cluster it is there. Until it has held one, half a beat: the control
// plane may be an older one that judges nodes by signals, and it signals
// every beat. After, two beats: a run continued as new, or one busy
// placing, hands out the next lease within them (at half a beat, under
// make test's load, every node signalled at each continue-as-new).
func (b *heartbeater) patience() time.Duration {
	if b.lease.Ever() {
		return 2 * b.every
	}
	// A beat once signals brought no lease: a cluster busy registering a
	// fleet is sent every other beat of its agents, not every one (at
	// 1,000 nodes, every one passed the 10,000 signals of a run), and an
	// older plane still hears from each within its 15 s.
	return b.every / 2 << min(b.unleased, 1)
}

// refusal asks, for two beats after a signal (the cluster may take it
// after the first question), whether the cluster refused it; a refused
// agent keeps telling, and gives up after maxRefusals.
func (b *heartbeater) refusal(ctx context.Context) error {
	if b.check == 0 {
		return nil
	}
	b.check--
	r := queryRefusal(ctx, b.tc, b.cluster, b.hb.AgentID)
	if r == nil {
		return nil
	}
	b.sent = nil
	b.log.Error("the cluster refuses this agent's heartbeats", "reason", r.Reason, "refused", r.Count, "max_refusals", b.maxRefusals)
	if r.Count < b.maxRefusals {
		return nil
	}
	hint := "give the agent the cluster's join token (an admin prints it: trainyard cluster join-token " + b.cluster + ")"
	if r.Reason == "unknown node" {
		hint = "--node must name a node of the cluster's spec"
	}
	return fmt.Errorf("agent %s: cluster %s refused %d heartbeats: %s; %s", b.hb.Node, b.cluster, r.Count, r.Reason, hint)
}

// queryRefusal asks the cluster whether it refuses this agent's
// heartbeats. A cluster that cannot be asked (an older workflow, a network
// blip) is no refusal.
func queryRefusal(ctx context.Context, tc client.Client, clusterName, agentID string) *cluster.Refusal {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := tc.QueryWorkflow(qctx, cluster.WorkflowID(clusterName), "", cluster.QueryRefusal, agentID)
	if err != nil {
		return nil
	}
	var r *cluster.Refusal
	if v.Get(&r) != nil {
		return nil
	}
	return r
}

// run beats every b.every, and at once when wake fires (a drain started
// or ended), until ctx ends; then, if stop says so (the agent drains on
// SIGTERM), once more so the cluster hears it.
func (b *heartbeater) run(ctx context.Context, wake <-chan struct{}, stop func() bool) error {
	t := time.NewTicker(b.every)
	defer t.Stop()
	for {
		if err := b.beat(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			if stop != nil && stop() {
				b.retryAt = time.Time{} // the last word is tried whatever the backoff
				_ = b.beat(context.WithoutCancel(ctx))
			}
			return nil
		case <-t.C:
		case <-wake:
		}
	}
}
