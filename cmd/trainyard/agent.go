package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/trainyard/trainyard/internal/agent/detect"
	"github.com/trainyard/trainyard/internal/agent/drain"
	"github.com/trainyard/trainyard/internal/agent/gpumetrics"
	"github.com/trainyard/trainyard/internal/agent/preempt"
	"github.com/trainyard/trainyard/internal/agent/procenv"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/internal/temporalx"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/workflows"
	"github.com/trainyard/trainyard/workflows/cluster"
)

type agentOptions struct {
	cluster      string
	node         string
	gpus         string
	expectedGPUs string
	advertise    string
	cpus         float64
	workDir      string
	heartbeat    time.Duration
	metrics      string
	temporal     temporalx.Options
	s3           objstore.Config
	wasmDir      string
	// preempt is a preemption notice source (preempt.Parse); drainTimeout
	// bounds how long SIGTERM waits for work to checkpoint and report.
	preempt      string
	preemptPoll  time.Duration
	drainTimeout time.Duration
	// secretsFile holds the join token and S3 keys (agentSecrets); jobUser
	// is the account jobs run as.
	secretsFile string
	jobUser     string
	// maxRefusals: the agent exits after the cluster refused this many of
	// its heartbeats (a wrong or missing join token never heals itself).
	maxRefusals int
	// simulate is how many hollow nodes to run (agentsim.go), named
	// node-simulateFrom and up; memoryMB overrides the detected memory.
	simulate, simulateFrom int
	memoryMB               int64
}

func newAgentCmd(g *globals) *cobra.Command {
	o := &agentOptions{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node agent: a Temporal worker on the node's own task queue that reports resources and runs jobs",
		Long: "agent detects the node's CPUs, memory and GPUs (nvidia-smi, or --gpus), heartbeats to its cluster's\n" +
			"workflow and runs the jobs placed on it with exactly the GPUs they were given. The join token and S3\n" +
			"keys come from a 0600 secrets file (--secrets-file, or the one its provisioner wrote), else\n" +
			"TRAINYARD_JOIN_SECRET. Usually started by `trainyard cluster up`; systemd units in deploy/systemd.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAgent(cmd.Context(), g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.cluster, "cluster", "", "cluster name (required)")
	f.StringVar(&o.node, "node", "", "this node's name in the cluster spec (required)")
	f.Float64Var(&o.cpus, "cpus", 0, "CPUs to offer instead of the detected ones (local agents sharing one machine each offer their spec's)")
	f.StringVar(&o.gpus, "gpus", "", `GPUs instead of nvidia-smi: "0:TITAN X:12GB,1:GTX 1080 Ti:11GB", "2xA100:80GB" or "none"`)
	f.StringVar(&o.expectedGPUs, "expected-gpus", "", "the GPUs the spec describes (--gpus syntax): offered where this machine has no nvidia-smi; where it has, the detected ones are (the cluster shows a difference)")
	f.StringVar(&o.workDir, "work-dir", "", "where job processes start (default: the agent's state dir, else the current dir)")
	f.DurationVar(&o.heartbeat, "heartbeat-interval", 5*time.Second, "how often to report to the cluster")
	f.StringVar(&o.metrics, "metrics-listen", "", "serve Prometheus metrics at http://ADDR/metrics (off when empty)")
	f.StringVar(&o.preempt, "preemption-notice", "", `watch for a spot/preemption notice: "aws", "gcp", "aws:URL", "gcp:URL" or an http(s) URL (200 = notice)`)
	f.DurationVar(&o.preemptPoll, "preemption-poll", 5*time.Second, "how often to ask the preemption notice source")
	f.DurationVar(&o.drainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM, how long running work gets to checkpoint and report before the agent exits")
	f.StringVar(&o.secretsFile, "secrets-file", "", "0600 file with join_token, s3_access_key_id, s3_secret_access_key (default: $TRAINYARD_AGENT_CONFIG, written by the provisioner)")
	f.IntVar(&o.maxRefusals, "max-refusals", 6, "exit non-zero once the cluster has refused this many heartbeats (wrong or missing join token, unknown node)")
	f.StringVar(&o.advertise, "advertise-address", "", "the IP address this node's peers reach it at (gangs' MASTER_ADDR, an LLM loop's trainer and pool; default: the source address of its route to --temporal-address)")
	f.IntVar(&o.simulate, "simulate", 0, "run this many hollow (simulated) nodes named NODE-1 ... NODE-N in this process: real heartbeats, leases and job reports, described resources, jobs that sleep instead of forking (sleep/true/false/echo/exit)")
	f.IntVar(&o.simulateFrom, "simulate-from", 1, "with --simulate: the number of the first node")
	f.Int64Var(&o.memoryMB, "memory-mb", 0, "memory to offer instead of the detected (MB)")
	f.StringVar(&o.jobUser, "job-user", "", "run jobs as this account, so they cannot read the agent's secrets (needs root; default: the agent's own user)")
	addTemporalFlags(f, &o.temporal)
	addS3Flags(f, &o.s3)
	addPluginFlags(f, &o.wasmDir)
	return cmd
}

func runAgent(ctx context.Context, g *globals, o *agentOptions) error {
	if o.cluster == "" || o.node == "" {
		return fmt.Errorf("agent: --cluster and --node are required")
	}
	if o.simulate < 0 || o.simulate > 0 && (o.simulateFrom < 0 || o.jobUser != "" || o.preempt != "") {
		return fmt.Errorf("agent: --simulate N wants N >= 0 and --simulate-from >= 0, without --job-user or --preemption-notice (hollow jobs fork nothing)")
	}
	ctx, log, done, err := g.boot(ctx, "trainyard-agent")
	if err != nil {
		return err
	}
	defer done()
	log = log.With("cluster", o.cluster, "node", o.node)
	// Nothing the agent starts as its own user may read its memory,
	// environment or open files through /proc (as root they still can:
	// hence --job-user).
	if err := notDumpable(); err != nil {
		return fmt.Errorf("agent %s: %w", o.node, err)
	}
	secrets, err := loadAgentSecrets(o.secretsFile)
	if err != nil {
		return fmt.Errorf("agent %s: %w", o.node, err)
	}
	if secrets.S3AccessKeyID != "" {
		o.s3.AccessKeyID, o.s3.SecretAccessKey = secrets.S3AccessKeyID, secrets.S3SecretAccessKey
	}
	if o.simulate > 0 {
		tc, addr, err := dialControlPlane(ctx, o, log)
		if err != nil {
			return err
		}
		defer tc.Close()
		return runHollowAgents(ctx, o, log, secrets, tc, addr)
	}
	var jobUser *procenv.User
	if o.jobUser != "" {
		if jobUser, err = procenv.LookupUser(o.jobUser); err != nil {
			return fmt.Errorf("agent %s: %w", o.node, err)
		}
	}

	if o.metrics != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", g.telemetry.Metrics)
		ms, err := serveAPI(o.metrics, mux, log)
		if err != nil {
			return err
		}
		defer ms.Stop(context.Background())
		log.Info("metrics", "url", ms.URL+"/metrics")
	}
	dopts := detect.Options{GPUs: o.gpus, Expected: o.expectedGPUs}
	// nvidia-smi lists every GPU of the machine; the agent offers those its
	// CUDA_VISIBLE_DEVICES shows (the local provisioner splits a machine's
	// GPUs between its local agents that way).
	if v, ok := os.LookupEnv(procenv.CUDAVisibleDevices); ok {
		if idx, ok := detect.ParseVisible(v); ok {
			dopts.Visible = idx
		} else {
			log.Warn("CUDA_VISIBLE_DEVICES names no indices: offering every GPU nvidia-smi lists", "value", v)
		}
	}
	res, err := detect.Detect(ctx, dopts)
	if err != nil {
		return fmt.Errorf("agent %s: detect resources: %w", o.node, err)
	}
	if o.cpus > 0 {
		res.CPUs = o.cpus
	}
	// Per-GPU utilisation and memory on /metrics (and OTLP), read from
	// nvidia-smi at most every 5 s however often it is scraped.
	if _, err := gpumetrics.Register(otel.Meter("github.com/trainyard/trainyard/agent"), o.cluster, o.node,
		func(ctx context.Context) ([]detect.GPUStatus, error) { return detect.GPUs(ctx, dopts) }, 5*time.Second); err != nil {
		return fmt.Errorf("agent %s: gpu metrics: %w", o.node, err)
	}
	dir := o.workDir
	if dir == "" {
		dir = os.Getenv("TRAINYARD_AGENT_DIR")
	}
	if dir == "" {
		dir, _ = os.Getwd()
	}
	dir, _ = filepath.Abs(dir)

	tc, addr, err := dialControlPlane(ctx, o, log)
	if err != nil {
		return err
	}
	defer tc.Close()
	runner, closeRunner, err := newTrainingRunner(ctx, o)
	if err != nil {
		return fmt.Errorf("agent %s: %w", o.node, err)
	}
	defer closeRunner()
	if runner != nil {
		runner.Address = addr
	}
	if runner == nil {
		log.Warn("no --s3-endpoint: this agent runs jobs but no training runs")
	}
	drains := drain.New()
	if runner != nil {
		runner.Drain = drains
	}
	// Stopping waits up to drainTimeout for activities, so segments that
	// checkpointed on SIGTERM still report.
	agentID, lease := uuid.NewString(), cluster.NewLeaseHolder()
	w := worker.New(tc, cluster.NodeQueue(o.cluster, o.node), agentWorkerOptions(o, o.node))
	deps := workflows.AgentDeps{Dir: dir, JobUser: jobUser, Runner: runner, Drain: drains, AgentID: agentID, Lease: lease}
	if runner != nil {
		deps.Logs = runner.Objects
	}
	workflows.RegisterAgent(w, deps)
	if runner != nil {
		if err := registerSelfplayAgent(ctx, w, o, dir, runner, jobUser); err != nil {
			return fmt.Errorf("agent %s: %w", o.node, err)
		}
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("agent %s: start worker: %w", o.node, err)
	}
	defer w.Stop()
	log.Info("agent running", "cpus", res.CPUs, "memory_mb", res.MemoryMB, "gpus", len(res.GPUs), "queue", cluster.NodeQueue(o.cluster, o.node))

	if o.preempt != "" {
		src, err := preempt.Parse(o.preempt)
		if err != nil {
			return fmt.Errorf("agent %s: %w", o.node, err)
		}
		go preempt.Watch(ctx, src, o.preemptPoll, log, func(n preempt.Notice) {
			log.Warn("preemption notice: draining", "notice", n.String())
			drains.Start(n.String(), n.Deadline)
		})
	}

	b := &heartbeater{tc: tc, cluster: o.cluster, secrets: secrets, lease: lease, every: o.heartbeat, maxRefusals: o.maxRefusals, log: log,
		hb: cluster.Heartbeat{Node: o.node, AgentID: agentID, Resources: res, PID: os.Getpid(), Address: addr},
		refresh: func(ctx context.Context) ([]int, string) {
			return gpuUtil(ctx, dopts, len(res.GPUs)), drains.Reason()
		}}
	// SIGTERM (a spot reclaim, a node shutdown, kubectl drain): no new
	// work, and the runs here checkpoint now and move; the deferred worker
	// stop waits for them to report.
	return b.run(ctx, drains.Changed(), func() bool {
		defer log.Info("agent stopping: draining", "timeout", o.drainTimeout)
		return drains.Start("agent got SIGTERM", time.Now().Add(o.drainTimeout))
	})
}

// dialControlPlane connects to Temporal and finds the address the node's
// peers reach it at.
func dialControlPlane(ctx context.Context, o *agentOptions, log *slog.Logger) (client.Client, string, error) {
	o.temporal.Logger = log
	tc, err := temporalx.Dial(ctx, o.temporal)
	if err != nil {
		return nil, "", err
	}
	addr := o.advertise
	if addr == "" {
		if addr, err = routeSource(o.temporal.Address); err != nil {
			tc.Close()
			return nil, "", fmt.Errorf("agent %s: %w (set --advertise-address)", o.node, err)
		}
	}
	if _, err := netip.ParseAddr(addr); err != nil {
		tc.Close()
		return nil, "", fmt.Errorf("agent %s: --advertise-address %q: want an IP address (the cluster takes no other)", o.node, addr)
	}
	log.Info("advertising", "address", addr)
	return tc, addr, nil
}

// agentWorkerOptions are a node agent's worker's. Heartbeats are sent at
// least every beat interval: a node's lease is one of them.
func agentWorkerOptions(o *agentOptions, node string) worker.Options {
	return worker.Options{Identity: "agent@" + node, WorkerStopTimeout: o.drainTimeout,
		MaxHeartbeatThrottleInterval: min(heartbeatThrottle, o.heartbeat)}
}

// newTrainingRunner opens the bucket and a plugin runtime for training
// runs; without an S3 endpoint the agent trains nothing (nil runner).
func newTrainingRunner(ctx context.Context, o *agentOptions) (*training.Runner, func(), error) {
	if o.s3.Endpoint == "" {
		return nil, func() {}, nil
	}
	store, err := objstore.Open(ctx, o.s3)
	if err != nil {
		return nil, nil, err
	}
	rt, err := newPluginRuntime(ctx, o.wasmDir)
	if err != nil {
		return nil, nil, err
	}
	return &training.Runner{Plugins: rt, Store: pluginstore.New(store), Checkpoints: checkpoint.New(store, checkpoint.Options{}), Objects: store, Node: o.node},
		func() { _ = rt.Close(context.Background()) }, nil
}

// gpuUtil reads utilization from nvidia-smi; described GPUs report -1.
func gpuUtil(ctx context.Context, o detect.Options, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = -1
	}
	if o.GPUs != "" {
		return out
	}
	gs, err := detect.GPUs(ctx, o)
	if err != nil {
		return out
	}
	for i, g := range gs {
		if i < n {
			out[i] = g.UtilizationPct
		}
	}
	return out
}

// routeSource is the address this machine sends from to reach hostport: the
// one its peers can reach it at when they share the control plane's
// network (a UDP "connection" only asks the kernel for the route; nothing
// is sent).
func routeSource(hostport string) (string, error) {
	c, err := net.Dial("udp", hostport)
	if err != nil {
		return "", fmt.Errorf("route to the control plane %s: %w", hostport, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}
