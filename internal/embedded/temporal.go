// Package embedded runs the servers that `trainyard dev` needs inside one
// process: a Temporal server on SQLite, the Temporal Web UI and an S3
// gateway. Production deployments point at external ones instead.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	tlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

// TemporalOptions configures the embedded Temporal server.
type TemporalOptions struct {
	// DatabaseFile is the SQLite file; its schema is created when the file is new.
	DatabaseFile string
	// IP to bind every service on; always loopback for dev.
	IP string
	// FrontendPort is the gRPC port clients use; 0 picks a free one.
	FrontendPort int
	Namespaces   []string
	// SearchAttributes are registered on each namespace when it is created.
	SearchAttributes map[string]enumspb.IndexedValueType
	Logger           *slog.Logger
	// DynamicConfig overrides server defaults (keys as in Temporal's docs).
	DynamicConfig map[string]any
	// PortsFile keeps the internal ports (frontend HTTP, history, matching,
	// worker) picked on first start, so that a restart binds the same ones;
	// one held by another listener by then is replaced by a new pick (nothing
	// outside the process dials them). "" picks new ones on every start.
	PortsFile string
}

// Temporal is a running embedded Temporal server.
type Temporal struct {
	server  temporal.Server
	log     *slogAdapter
	Address string // host:port of the frontend gRPC service
}

// DefaultDynamicConfig holds the overrides measured to matter on a small
// machine: polling the transfer queue faster cuts a one-activity workflow
// from ~100 ms to ~30 ms; more updates in flight per execution let a
// cluster's scheduling cycle batch its asks (docs/scheduling.md).
func DefaultDynamicConfig() map[string]any {
	return map[string]any{
		"history.transferProcessorMaxPollRPS":           100,
		"history.cacheHostLevelMaxSize":                 8096,
		"frontend.maxNamespaceVisibilityRPSPerInstance": 100,
		// A cluster's scheduling cycle holds the allocate updates it
		// decides in one batch open together; Temporal's default of 10
		// in flight per execution would cap a batch at 10.
		"history.maxInFlightUpdates": 500,
		// Queries of an execution whose workflow task is running wait in
		// a buffer of one by default; the next is ResourceExhausted (a 429
		// to the API). A busy cluster workflow gets queries from the API,
		// its preflights and agents at once (Temporal's dev server sets
		// 10,000).
		"history.MaxBufferedQueryCount": 1000,
		// Events that arrive while a workflow task runs are buffered; past
		// 100 (the default) Temporal fails the task (ForceCloseCommand) and
		// starts another with everything. A 1,000-node cluster's signals,
		// asks and lease ends pass 100 within a second, so its tasks were
		// failed one after another: 53 completed in 5 minutes, and it
		// never continued as new. A real Temporal needs the same for such
		// a fleet (docs/scheduling.md).
		"history.maximumBufferedEventsBatch": 5000,
		// A fleet's agents each long-poll their node's task queue: at
		// 1,000 hollow nodes the default 1,200 concurrent polls per
		// namespace turned the control worker's own polls away (its
		// cluster workflow's tasks timed out), and the default 4
		// partitions per queue made matching load 8,000 of them into
		// "namespace rate limit exceeded". One server: one partition.
		"frontend.namespaceCount":              20000,
		"frontend.namespaceRPS":                20000,
		"matching.numTaskqueueReadPartitions":  1,
		"matching.numTaskqueueWritePartitions": 1,
	}
}

// StartTemporal creates the schema if needed and starts all four Temporal
// services in this process. State lives in DatabaseFile and survives restarts.
func StartTemporal(opts TemporalOptions) (*Temporal, error) {
	if opts.IP == "" {
		opts.IP = "127.0.0.1"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.FrontendPort != 0 {
		if err := checkRequestedPort("temporal frontend", opts.IP, opts.FrontendPort); err != nil {
			return nil, err
		}
	}
	kept := internalPorts{}
	if opts.PortsFile != "" {
		p, err := readPorts(opts.PortsFile)
		if err != nil {
			opts.Logger.Warn("the embedded Temporal server's kept ports are unreadable; picking new ones", "err", err)
		}
		kept = p
	}
	// Picked ports are checked free and bound by the server a moment later.
	// Out of the ephemeral range (see FreePort) only a program binding that
	// very port can take one in between; should that happen with an error
	// returned, the server is built again on newly picked ports. (A service
	// whose gRPC listener fails exits the process from inside Temporal; the
	// next start finds that port held and picks another.)
	for attempt := 1; ; attempt++ {
		ports, err := choosePorts(opts, kept)
		if err != nil {
			return nil, err
		}
		t, err := startTemporal(opts, ports)
		if err == nil || attempt == 3 || !addressInUse(err) {
			return t, err
		}
		opts.Logger.Warn("a port of the embedded Temporal server was taken; picking others", "err", err)
		kept = internalPorts{}
	}
}

func addressInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// freePort is FreePort; a test replaces it to hand out a taken port.
var freePort = FreePort

// choosePorts returns the port of every service: the frontend's as asked
// (0: a new pick), the internal ones as kept where they are still free,
// outside the ephemeral range and distinct, else new picks, which are kept.
func choosePorts(opts TemporalOptions, kept internalPorts) (map[string]int, error) {
	used := map[int]bool{opts.FrontendPort: true}
	pick := func() (int, error) {
		for range 50 {
			p, err := freePort(opts.IP)
			if err != nil || !used[p] {
				used[p] = true
				return p, err
			}
		}
		return 0, fmt.Errorf("find free port on %s: only taken ones came back", opts.IP)
	}
	ports := map[string]int{}
	changed := false
	for _, svc := range internalServices {
		if p := kept[svc]; p > 0 && p <= 65535 && !used[p] && outsideEphemeral(p) {
			err := portFree(opts.IP, p)
			if err == nil {
				ports[svc], used[p] = p, true
				continue
			}
			opts.Logger.Warn("the port kept for the embedded Temporal server's "+svc+" service is held by another listener; picking another",
				"port", p, "err", err)
		}
		p, err := pick()
		if err != nil {
			return nil, err
		}
		ports[svc], changed = p, true
	}
	ports["frontend"] = opts.FrontendPort
	if ports["frontend"] == 0 {
		p, err := pick()
		if err != nil {
			return nil, err
		}
		ports["frontend"] = p
	}
	if opts.PortsFile != "" && changed {
		keep := internalPorts{}
		for _, svc := range internalServices {
			keep[svc] = ports[svc]
		}
		if err := writePorts(opts.PortsFile, keep); err != nil {
			return nil, fmt.Errorf("keep the embedded Temporal server's ports: %w", err)
		}
	}
	return ports, nil
}

func startTemporal(opts TemporalOptions, ports map[string]int) (*Temporal, error) {
	frontend := ports["frontend"]
	addr := func(p int) string { return net.JoinHostPort(opts.IP, strconv.Itoa(p)) }

	sqlConf, err := sqliteConfig(opts.DatabaseFile, opts.Namespaces, opts.SearchAttributes)
	if err != nil {
		return nil, err
	}

	const clusterName = "active"
	conf := &config.Config{}
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = opts.IP
	conf.Persistence.DefaultStore = "sqlite-default"
	conf.Persistence.VisibilityStore = "sqlite-default"
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite-default": {SQL: sqlConf}}
	conf.ClusterMetadata = &cluster.Config{
		EnableGlobalNamespace:    false,
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             addr(frontend),
				HTTPAddress:            addr(ports["frontend-http"]),
				ClusterID:              "6c1e5f2a-6d0e-4b8e-9a57-7a2d7e4f1c01", // fixed: one dev cluster per data dir
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	service := func(name string) config.Service {
		var s config.Service
		s.RPC.GRPCPort = ports[name]
		s.RPC.BindOnIP = opts.IP
		if name == "frontend" {
			s.RPC.HTTPPort = ports["frontend-http"]
		}
		return s
	}
	conf.Services = map[string]config.Service{
		"frontend": service("frontend"),
		"history":  service("history"),
		"matching": service("matching"),
		"worker":   service("worker"),
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = addr(frontend)

	dyn := dynamicconfig.StaticClient{}
	for k, v := range opts.DynamicConfig {
		dyn[dynamicconfig.MakeKey(k)] = v
	}
	logger := &slogAdapter{log: opts.Logger, quiet: &atomic.Bool{}}
	srv, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: static.SingleLocalHost(addr(frontend)),
			primitives.MatchingService: static.SingleLocalHost(addr(ports["matching"])),
			primitives.HistoryService:  static.SingleLocalHost(addr(ports["history"])),
			primitives.WorkerService:   static.SingleLocalHost(addr(ports["worker"])),
		}),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorization.NewNoopAuthorizer()),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return authorization.NewNoopClaimMapper() }),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return nil, fmt.Errorf("create temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start temporal server: %w", err)
	}
	return &Temporal{server: srv, log: logger, Address: addr(frontend)}, nil
}

// Stop shuts every service down. Services stopping one after another warn
// about each other's closed connections; that noise is dropped.
func (t *Temporal) Stop() error {
	t.log.quiet.Store(true)
	return t.server.Stop()
}

func sqliteConfig(file string, namespaces []string, attrs map[string]enumspb.IndexedValueType) (*config.SQL, error) {
	conf := &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: file,
		// WAL with one connection: more connections gave SQLITE_BUSY and
		// shard errors; WAL triples throughput over the defaults.
		ConnectAttributes: map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": "normal"},
		MaxConns:          1,
	}
	if _, err := os.Stat(file); os.IsNotExist(err) {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return nil, fmt.Errorf("create database dir: %w", err)
		}
		if err := sqliteschema.SetupSchema(conf); err != nil {
			return nil, fmt.Errorf("set up temporal schema in %s: %w", file, err)
		}
	}
	nss := make([]*sqliteschema.NamespaceConfig, 0, len(namespaces))
	for _, ns := range namespaces {
		nc, err := sqliteschema.NewNamespaceConfig("active", ns, false, attrs)
		if err != nil {
			return nil, fmt.Errorf("namespace %s: %w", ns, err)
		}
		nss = append(nss, nc)
	}
	// Idempotent: existing namespaces are left as they are.
	if err := sqliteschema.CreateNamespaces(conf, nss...); err != nil {
		return nil, fmt.Errorf("create namespaces: %w", err)
	}
	return conf, nil
}

// slogAdapter sends Temporal's server logs to slog. The server is chatty at
// info level, so its info becomes debug here.
type slogAdapter struct {
	log   *slog.Logger
	tags  []tag.Tag
	quiet *atomic.Bool // shared by every derived logger
}

func (l *slogAdapter) emit(level slog.Level, msg string, tags []tag.Tag) {
	ctx := context.Background()
	if (l.quiet.Load() && level < slog.LevelError) || !l.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]any, 0, 2*(len(l.tags)+len(tags)))
	for _, t := range append(l.tags[:len(l.tags):len(l.tags)], tags...) {
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	l.log.Log(ctx, level, msg, attrs...)
}

func (l *slogAdapter) Debug(msg string, tags ...tag.Tag)  { l.emit(slog.LevelDebug-4, msg, tags) }
func (l *slogAdapter) Info(msg string, tags ...tag.Tag)   { l.emit(slog.LevelDebug, msg, tags) }
func (l *slogAdapter) Warn(msg string, tags ...tag.Tag)   { l.emit(slog.LevelWarn, msg, tags) }
func (l *slogAdapter) Error(msg string, tags ...tag.Tag)  { l.emit(slog.LevelError, msg, tags) }
func (l *slogAdapter) DPanic(msg string, tags ...tag.Tag) { l.emit(slog.LevelError, msg, tags) }
func (l *slogAdapter) Panic(msg string, tags ...tag.Tag) {
	l.emit(slog.LevelError, msg, tags)
	panic(msg)
}
func (l *slogAdapter) Fatal(msg string, tags ...tag.Tag) {
	l.emit(slog.LevelError, msg, tags)
	os.Exit(1)
}
func (l *slogAdapter) With(tags ...tag.Tag) tlog.Logger {
	return &slogAdapter{log: l.log, quiet: l.quiet, tags: append(l.tags[:len(l.tags):len(l.tags)], tags...)}
}
