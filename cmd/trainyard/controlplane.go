package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/trainyard/trainyard/internal/admission"
	"github.com/trainyard/trainyard/internal/atomicfile"
	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/provision"
	"github.com/trainyard/trainyard/internal/provision/local"
	"github.com/trainyard/trainyard/internal/provision/ssh"
	"github.com/trainyard/trainyard/internal/provision/static"
	"github.com/trainyard/trainyard/internal/temporalx"
	"github.com/trainyard/trainyard/plugins/builtin"
	"github.com/trainyard/trainyard/workflows"
	"github.com/trainyard/trainyard/workflows/pluginrun"
)

// The pieces `dev`, `server` and `worker` share.

func addTemporalFlags(fs *pflag.FlagSet, o *temporalx.Options) {
	fs.StringVar(&o.Address, "temporal-address", "127.0.0.1:7233", "Temporal frontend host:port")
	fs.StringVar(&o.Namespace, "temporal-namespace", "default", "Temporal namespace")
	fs.BoolVar(&o.TLS, "temporal-tls", false, "use TLS with the system roots")
	fs.StringVar(&o.TLSCAFile, "temporal-tls-ca", "", "CA certificate (PEM) to verify the Temporal server")
	fs.StringVar(&o.TLSCertFile, "temporal-tls-cert", "", "client certificate (PEM) for mTLS")
	fs.StringVar(&o.TLSKeyFile, "temporal-tls-key", "", "client key (PEM) for mTLS")
	fs.StringVar(&o.TLSServerName, "temporal-tls-server-name", "", "override the TLS server name")
}

func addS3Flags(fs *pflag.FlagSet, c *objstore.Config) {
	fs.StringVar(&c.Endpoint, "s3-endpoint", "", "S3 endpoint (host:port or URL); credentials come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ~/.aws/credentials or instance metadata")
	fs.StringVar(&c.Bucket, "s3-bucket", "trainyard", "bucket for plugins, checkpoints and datasets (created if missing)")
	fs.StringVar(&c.Region, "s3-region", os.Getenv("AWS_REGION"), "S3 region")
	fs.BoolVar(&c.Insecure, "s3-insecure", false, "plain HTTP to the S3 endpoint")
}

// s3URL is c's endpoint as a URL (its scheme says plain HTTP or TLS), to
// hand to agents that run with none of c's other settings.
func s3URL(c objstore.Config) string {
	switch {
	case c.Endpoint == "" || strings.Contains(c.Endpoint, "://"):
		return c.Endpoint
	case c.Insecure:
		return "http://" + c.Endpoint
	}
	return "https://" + c.Endpoint
}

// agentLaunch says how control planes start agents: this very binary, in
// `agent` mode, dialing temporalAddr.
type agentLaunch struct {
	temporalAddr, namespace string
	agentsDir               string // local provisioner state
	// s3 is the bucket agents keep checkpoints in. Keys are passed only
	// when set (dev's generated ones); elsewhere agents use their own
	// AWS credentials.
	s3 objstore.Config
}

func addAgentFlags(fs *pflag.FlagSet, a *agentLaunch, defaultDir string) {
	fs.StringVar(&a.agentsDir, "agents-dir", defaultDir, "state of agents started by the local provisioner")
	fs.StringVar(&a.temporalAddr, "agent-temporal-address", "", "Temporal address that started agents dial (default: --temporal-address)")
}

func (a agentLaunch) provisioners() (provision.Set, error) {
	dir, err := filepath.Abs(a.agentsDir)
	if err != nil {
		return nil, err
	}
	// The provisioner kinds: each package registers its spec section
	// itself (spec.Register, from its init); here each gets its instance.
	return provision.Set{local.Kind: local.New(dir), ssh.Kind: ssh.New(), static.Kind: static.New()}, nil
}

// launch is how node's agent is started. Its secrets (the join token, S3
// keys) go in its 0600 secrets file, never its environment: every process
// it starts as its own user could read that from /proc.
func (a agentLaunch) launch(clusterName string, node spec.Node, token string, heartbeat time.Duration) provision.AgentLaunch {
	bin, _ := os.Executable()
	args := []string{"agent", "--cluster", clusterName, "--node", node.Name,
		"--temporal-address", a.temporalAddr, "--temporal-namespace", a.namespace,
		"--heartbeat-interval", heartbeat.String()}
	if k, _ := spec.LookupKind(node.Provisioner.Kind); k.SharesMachine {
		// Local agents share this machine: each sees the GPUs its spec
		// gives it (CUDA_VISIBLE_DEVICES, set by the local provisioner) and
		// offers what nvidia-smi reports of them; the described ones only
		// where there is no nvidia-smi.
		if len(node.Resources.GPUs) > 0 {
			args = append(args, "--expected-gpus", node.GPUDescription())
		}
		if node.Resources.CPUs > 0 {
			args = append(args, "--cpus", strconv.FormatFloat(node.Resources.CPUs, 'f', -1, 64))
		}
	}
	if node.PreemptionNotice != "" {
		args = append(args, "--preemption-notice", node.PreemptionNotice)
	}
	if node.JobUser != "" {
		args = append(args, "--job-user", node.JobUser)
	}
	secrets := agentSecrets{JoinToken: token}
	if a.s3.Endpoint != "" {
		args = append(args, "--s3-endpoint", a.s3.Endpoint, "--s3-bucket", a.s3.Bucket)
		if a.s3.Insecure {
			args = append(args, "--s3-insecure")
		}
		if a.s3.Region != "" {
			args = append(args, "--s3-region", a.s3.Region)
		}
		if a.s3.AccessKeyID != "" {
			secrets.S3AccessKeyID, secrets.S3SecretAccessKey = a.s3.AccessKeyID, a.s3.SecretAccessKey
		}
	}
	cfg, _ := json.Marshal(secrets)
	return provision.AgentLaunch{Binary: bin, Args: args, Config: cfg}
}

// policyRefresh is how often a server or worker checks S3 for a policy
// bundle pushed through another process.
const policyRefresh = 15 * time.Second

// startWorker runs the control-plane worker; placements use the params of
// adm's bundle in force.
//
// heartbeatThrottle: the API shows an activity's progress (a run's
// iteration, a self-play batch's games) from its last heartbeat that
// reached Temporal. The SDK sends one per 0.8 × the heartbeat timeout, at
// most 60 s by default: a batch with a 120 s timeout showed nothing for its
// first minute. This sends one per 10 s at most. Not less: the SDK gives a
// heartbeat's RPC the throttle interval to finish and cancels the activity
// when it does not (it assumes the RPC was retried for the whole heartbeat
// timeout). At 2 s, and again at 5 s, a control plane that took that long
// to answer on 2 busy cores cancelled healthy LLM-loop rollout workers
// ("context deadline exceeded"), each then placed again. 10 s leaves an
// activity with a 20 s heartbeat timeout the SDK's own margin.
const heartbeatThrottle = 10 * time.Second

// deadlockDetection is how long one workflow task may run workflow code
// before the SDK calls it deadlocked and fails the task (1 s by default).
// A cluster of 1,000 nodes applying a burst of registrations, or replaying
// its run after a cache miss, takes longer on 2 busy cores; each failed
// task was retried from a full replay, longer still, and the cluster
// stopped making progress. Temporal's own limit is the task's 10 s timeout.
const deadlockDetection = 8 * time.Second

func startWorker(c client.Client, store *objstore.Store, rt *pluginhost.Runtime, al agentLaunch, adm *admission.Service) (worker.Worker, error) {
	host, _ := os.Hostname()
	identity := fmt.Sprintf("control@%s:%d", host, os.Getpid())
	provs, err := al.provisioners()
	if err != nil {
		return nil, err
	}
	w := worker.New(c, workflows.ControlTaskQueue, worker.Options{Identity: identity, MaxHeartbeatThrottleInterval: heartbeatThrottle,
		DeadlockDetectionTimeout: deadlockDetection})
	workflows.Register(w, workflows.Deps{Store: store, Plugins: rt, Client: c, Identity: identity,
		Provisioners: provs, Launch: al.launch, Params: func() params.Params { return adm.Engine().Params() },
		Decide: func(ctx context.Context, in policy.Input) (policy.Decision, error) {
			return adm.Engine().Decide(ctx, in)
		}})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start control worker: %w", err)
	}
	return w, nil
}

// ensureAdminToken creates the first admin token when the store is empty and
// writes it (0600) to file, so a fresh install is usable and nothing is
// printed to logs.
func ensureAdminToken(tokens *auth.Store, file string) (created bool, err error) {
	if tokens.Len() > 0 {
		return false, nil
	}
	secret, _, err := tokens.Create("admin", auth.Admin)
	if err != nil {
		return false, err
	}
	if err := atomicfile.Write(file, []byte(secret+"\n"), 0o600); err != nil {
		return false, fmt.Errorf("admin token: %w", err)
	}
	return true, nil
}

// SearchAttributes are the custom search attributes trainyard's workflows
// set; `dev` registers them, an external Temporal needs them created once
// (see README).
var searchAttributes = map[string]enumspb.IndexedValueType{
	pluginrun.SearchAttribute.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}

func addPluginFlags(fs *pflag.FlagSet, dir *string) {
	def := ""
	if c, err := os.UserCacheDir(); err == nil {
		def = filepath.Join(c, "trainyard", "wasm")
	}
	fs.StringVar(dir, "plugin-cache-dir", def, "on-disk cache of compiled WASM plugins (empty: memory only)")
}

// openPluginStore opens the plugin store and registers the built-in plugins
// the binary carries (idempotent; a stored plugin of the same name@version
// is kept).
func openPluginStore(ctx context.Context, store *objstore.Store, log *slog.Logger) (*pluginstore.Store, error) {
	ps := pluginstore.New(store)
	fsys := builtin.FS()
	set, err := pluginstore.Builtins(fsys)
	if err != nil {
		return nil, err
	}
	rep, err := ps.Seed(ctx, fsys, set)
	if err != nil {
		return nil, fmt.Errorf("register built-in plugins: %w", err)
	}
	log.Info("built-in plugins", "carried", len(set), "added", len(rep.Added), "present", rep.Present)
	for _, k := range rep.Kept {
		log.Warn("built-in plugin not registered: a stored plugin has its name@version", "plugin", k)
	}
	return ps, nil
}

func newPluginRuntime(ctx context.Context, dir string) (*pluginhost.Runtime, error) {
	return pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{CacheDir: dir})
}

// connect dials an external Temporal and opens the bucket and the plugin
// runtime: what `server` and `worker` both need. closeAll releases them.
func connect(ctx context.Context, log *slog.Logger, t temporalx.Options, s3 objstore.Config, wasmDir string) (
	tc client.Client, store *objstore.Store, rt *pluginhost.Runtime, closeAll func(), err error) {
	t.Logger = log
	if tc, err = temporalx.Dial(ctx, t); err != nil {
		return nil, nil, nil, nil, err
	}
	if store, err = objstore.Open(ctx, s3); err != nil {
		tc.Close()
		return nil, nil, nil, nil, err
	}
	if rt, err = newPluginRuntime(ctx, wasmDir); err != nil {
		tc.Close()
		return nil, nil, nil, nil, err
	}
	return tc, store, rt, func() {
		_ = rt.Close(context.Background())
		tc.Close()
	}, nil
}

type apiServer struct {
	srv *http.Server
	URL string
}

// serveAPI listens on addr (port 0 picks one) and serves h in the background.
func serveAPI(addr string, h http.Handler, log *slog.Logger) (*apiServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("api listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("api server stopped", "err", err)
		}
	}()
	return &apiServer{srv: srv, URL: "http://" + l.Addr().String()}, nil
}

func (a *apiServer) Stop(ctx context.Context) { _ = a.srv.Shutdown(ctx) }

// readyChecks are /readyz's: Temporal answers, the bucket is reachable, and
// some control-plane worker (in this process or another) polls its queue.
func readyChecks(c client.Client, store *objstore.Store) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"temporal": func(ctx context.Context) error {
			_, err := c.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		},
		"s3": store.Ping,
		"worker": func(ctx context.Context) error {
			resp, err := c.DescribeTaskQueue(ctx, workflows.ControlTaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
			if err != nil {
				return err
			}
			if len(resp.GetPollers()) == 0 {
				return fmt.Errorf("no worker polls task queue %s: start `trainyard worker`", workflows.ControlTaskQueue)
			}
			return nil
		},
	}
}
