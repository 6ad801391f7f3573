package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/trainyard/trainyard/internal/agent/detect"
	"github.com/trainyard/trainyard/internal/agent/drain"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/resources"
	"github.com/trainyard/trainyard/workflows"
	"github.com/trainyard/trainyard/workflows/cluster"
)

// Hollow nodes, as kubemark, KWOK and nomad-nodesim have them: `agent
// --simulate N --node PREFIX` runs the agents of nodes PREFIX-1 ...
// PREFIX-N in one process, through the agent's own code (signed
// heartbeats, leases, drain, job start and end) on one Temporal client
// and one S3 client. Their resources are described (--cpus, --memory-mb,
// --gpus), and their jobs sleep instead of forking (internal/agent/hollow):
// a fleet of a thousand fits beside the control plane on one machine.

// hollowNames are the simulated nodes' names.
func hollowNames(o *agentOptions) []string {
	names := make([]string, o.simulate)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", o.node, o.simulateFrom+i)
	}
	return names
}

// hollowResources are what each simulated node offers.
func hollowResources(ctx context.Context, o *agentOptions) (resources.Capacity, error) {
	gpus := o.gpus
	if gpus == "" {
		gpus = "none" // never this machine's
	}
	res, err := detect.Detect(ctx, detect.Options{GPUs: gpus})
	if err != nil {
		return res, err
	}
	if o.cpus > 0 {
		res.CPUs = o.cpus
	}
	if o.memoryMB > 0 {
		res.MemoryMB = o.memoryMB
	}
	return res, nil
}

func runHollowAgents(ctx context.Context, o *agentOptions, log *slog.Logger, secrets agentSecrets, tc client.Client, addr string) error {
	res, err := hollowResources(ctx, o)
	if err != nil {
		return fmt.Errorf("agent --simulate: %w", err)
	}
	var logs *objstore.Store
	if o.s3.Endpoint != "" {
		if logs, err = objstore.Open(ctx, o.s3); err != nil {
			return fmt.Errorf("agent --simulate: %w", err)
		}
	}
	dir := o.workDir
	if dir == "" {
		dir = os.TempDir()
	}
	names := hollowNames(o)
	log.Info("hollow agents starting", "nodes", len(names), "first", names[0], "last", names[len(names)-1], "cpus", res.CPUs, "memory_mb", res.MemoryMB, "gpus", len(res.GPUs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Spread the first beats over one interval, as a fleet's
			// agents start at different times.
			delay := o.heartbeat * time.Duration(i) / time.Duration(len(names))
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			if err := runHollowNode(ctx, o, log.With("node", name), name, res, secrets, tc, addr, dir, logs); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs // the first error, or nil once ctx ended
}

// runHollowNode is one simulated node's agent: its worker on the node's
// queue and its heartbeater, until ctx ends.
func runHollowNode(ctx context.Context, o *agentOptions, log *slog.Logger, name string, res resources.Capacity, secrets agentSecrets,
	tc client.Client, addr, dir string, logs *objstore.Store) error {
	agentID, lease, drains := uuid.NewString(), cluster.NewLeaseHolder(), drain.New()
	opts := agentWorkerOptions(o, name)
	// One poller each: a thousand nodes are a thousand queues.
	opts.MaxConcurrentActivityTaskPollers = 1
	w := worker.New(tc, cluster.NodeQueue(o.cluster, name), opts)
	workflows.RegisterAgent(w, workflows.AgentDeps{Dir: dir, Logs: logs, Drain: drains, AgentID: agentID, Lease: lease, Hollow: true})
	if err := w.Start(); err != nil {
		return fmt.Errorf("hollow node %s: start worker: %w", name, err)
	}
	defer w.Stop()
	b := &heartbeater{tc: tc, cluster: o.cluster, secrets: secrets, lease: lease, every: o.heartbeat, maxRefusals: o.maxRefusals, log: log,
		hb:      cluster.Heartbeat{Node: name, AgentID: agentID, Resources: res, PID: os.Getpid(), Address: addr},
		refresh: func(context.Context) ([]int, string) { return nil, drains.Reason() }}
	return b.run(ctx, drains.Changed(), nil)
}
