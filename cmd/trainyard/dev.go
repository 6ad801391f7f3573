package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/admission"
	"github.com/trainyard/trainyard/internal/atomicfile"
	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/embedded"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/temporalx"
)

// Endpoints is what `dev` writes to DATA/endpoints.json: where everything
// listens, for the CLI and for tests that start it on random ports.
type Endpoints struct {
	API            string `json:"api"`
	Docs           string `json:"docs"`
	Dashboard      string `json:"dashboard"`
	TemporalUI     string `json:"temporal_ui"`
	Temporal       string `json:"temporal"`
	Namespace      string `json:"namespace"`
	S3             string `json:"s3"`
	Bucket         string `json:"bucket"`
	S3Credentials  string `json:"s3_credentials_file"`
	AdminTokenFile string `json:"admin_token_file"`
	// S3AgentCredentials are the keys agents use (the embedded gateway's
	// agent account: no secrets, no policy or plugin writes), to copy to
	// static agents' machines; empty with --s3-endpoint.
	S3AgentCredentials string `json:"s3_agent_credentials_file,omitempty"`
}

// agentCredFile holds, in dev's data dir, the S3 keys of the embedded
// gateway's agent account.
const agentCredFile = "s3-agent-credentials.json"

type devOptions struct {
	dataDir      string
	ip           string
	apiPort      int
	temporalPort int
	uiPort       int
	s3Port       int
	bucket       string
	s3Endpoint   string // an S3 of its own (`trainyard s3`) instead of the embedded one
	s3CredFile   string
	uiWrites     bool
}

// uiMode is what dev's banner says of the Temporal UI: it has no login.
func uiMode(writes bool) string {
	if writes {
		return "no login, WRITE ACTIONS ON: anyone who reaches it can terminate work"
	}
	return "read-only, no login: it shows every workflow's history"
}

func newDevCmd(g *globals) *cobra.Command {
	o := &devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything in one process: Temporal, its Web UI, S3, the API and a worker",
		Long: "dev starts an embedded Temporal server (SQLite), the Temporal Web UI, an S3 gateway and the\n" +
			"Trainyard API and worker, all on loopback with state kept in --data-dir. Ports set to 0 are picked at random\n" +
			"on each start; Temporal's internal ports are picked on the first and kept in DATA/temporal-ports.json.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDev(cmd.Context(), g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.dataDir, "data-dir", ".trainyard", "where Temporal, S3 objects, credentials and tokens are kept")
	f.StringVar(&o.ip, "ip", "127.0.0.1", "address every service binds to")
	f.IntVar(&o.apiPort, "api-port", 8080, "REST API port")
	f.IntVar(&o.temporalPort, "temporal-port", 7233, "Temporal gRPC port")
	f.IntVar(&o.uiPort, "ui-port", 8233, "Temporal Web UI port")
	f.IntVar(&o.s3Port, "s3-port", 9000, "S3 port")
	f.StringVar(&o.bucket, "s3-bucket", "trainyard", "bucket for plugins, checkpoints and datasets")
	f.StringVar(&o.s3Endpoint, "s3-endpoint", "", "use this S3 (e.g. `trainyard s3`) instead of starting the embedded one")
	f.BoolVar(&o.uiWrites, "ui-write-actions", false, "let the Temporal Web UI terminate, signal and reset workflows (it has no login: anyone who reaches its port could)")
	f.StringVar(&o.s3CredFile, "s3-credentials", "", "with --s3-endpoint: its keys as JSON {access_key_id, secret_access_key} (default DATA/s3-credentials.json)")
	return cmd
}

func runDev(ctx context.Context, g *globals, o *devOptions) error {
	ctx, log, done, err := g.boot(ctx, "trainyard-dev")
	if err != nil {
		return err
	}
	defer done()
	dir, err := filepath.Abs(o.dataDir)
	if err != nil {
		return err
	}
	// The data dir holds the admin token, S3 keys, agents' secrets files and
	// temporal.db (whose histories anyone could replay): the user's alone.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}

	// Each started piece pushes its stop; they run in reverse on exit.
	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()

	credFile := filepath.Join(dir, "s3-credentials.json")
	if o.s3Endpoint != "" && o.s3CredFile != "" {
		credFile = o.s3CredFile
	}
	creds, err := embedded.LoadOrCreateS3Credentials(credFile)
	if err != nil {
		return err
	}
	s3 := &embedded.S3{Endpoint: strings.TrimPrefix(o.s3Endpoint, "http://"), Credentials: creds}
	if o.s3Endpoint == "" {
		if s3, err = embedded.StartS3(o.ip, o.s3Port, filepath.Join(dir, "s3"), creds); err != nil {
			return err
		}
		stops = append(stops, s3.Stop)
	} else if strings.HasPrefix(o.s3Endpoint, "https://") {
		return fmt.Errorf("--s3-endpoint %s: dev speaks plain HTTP to S3; use `trainyard server` for TLS", o.s3Endpoint)
	}

	tsrv, err := startTemporal(dir, o.ip, o.temporalPort, "default", log)
	if err != nil {
		return err
	}
	stops = append(stops, func() { _ = tsrv.Stop() })

	ui, err := embedded.StartUI(o.ip, o.uiPort, tsrv.Address, o.uiWrites)
	if err != nil {
		return err
	}
	stops = append(stops, ui.Stop)

	tc, err := temporalx.Dial(ctx, temporalx.Options{Address: tsrv.Address, Namespace: "default", Logger: log})
	if err != nil {
		return err
	}
	stops = append(stops, tc.Close)

	store, err := objstore.Open(ctx, objstore.Config{Endpoint: s3.Endpoint, Bucket: o.bucket, Insecure: true,
		AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey})
	if err != nil {
		return err
	}

	tokens, err := auth.Open(filepath.Join(dir, "tokens.json"))
	if err != nil {
		return err
	}
	adminFile := filepath.Join(dir, "admin.token")
	if _, err := ensureAdminToken(tokens, adminFile); err != nil {
		return err
	}

	rt, err := newPluginRuntime(ctx, filepath.Join(dir, "wasm-cache"))
	if err != nil {
		return err
	}
	stops = append(stops, func() { _ = rt.Close(context.Background()) })

	adm, err := admission.Open(ctx, store)
	if err != nil {
		return err
	}
	// Agents get the gateway's agent account (no join tokens, no policy or
	// plugin writes), not the root keys; an external S3 gives its own keys.
	agentCreds := creds
	if o.s3Endpoint == "" {
		if agentCreds, err = s3.GrantAgents(ctx, o.bucket); err != nil {
			return err
		}
		// Static agents on other machines get the same keys, copied by
		// their operator (cluster join-token --env --s3-credentials).
		b, _ := json.Marshal(agentCreds)
		if err := atomicfile.Write(filepath.Join(dir, agentCredFile), b, 0o600); err != nil {
			return err
		}
	}
	w, err := startWorker(tc, store, rt, agentLaunch{temporalAddr: tsrv.Address, namespace: "default", agentsDir: filepath.Join(dir, "agents"),
		s3: objstore.Config{Endpoint: s3.Endpoint, Bucket: o.bucket, Insecure: true, AccessKeyID: agentCreds.AccessKeyID, SecretAccessKey: agentCreds.SecretAccessKey}}, adm)
	if err != nil {
		return err
	}
	stops = append(stops, w.Stop)

	plugins, err := openPluginStore(ctx, store, log)
	if err != nil {
		return err
	}
	srv := api.New(api.Deps{Temporal: tc, Namespace: "default", Tokens: tokens, Store: store, Logger: log,
		Plugins: rt, PluginStore: plugins, Admission: adm,
		Metrics: g.telemetry.Metrics, Ready: readyChecks(tc, store), TemporalUI: ui.URL,
		AgentTemporal: tsrv.Address, AgentS3: "http://" + s3.Endpoint, AgentS3Bucket: o.bucket})
	as, err := serveAPI(fmt.Sprintf("%s:%d", o.ip, o.apiPort), srv.Handler(), log)
	if err != nil {
		return err
	}
	stops = append(stops, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		as.Stop(sctx)
	})

	ep := Endpoints{
		API: as.URL, Docs: as.URL + "/docs", Dashboard: as.URL + "/ui", TemporalUI: ui.URL, Temporal: tsrv.Address, Namespace: "default",
		S3: "http://" + s3.Endpoint, Bucket: o.bucket, S3Credentials: credFile, AdminTokenFile: adminFile,
	}
	if o.s3Endpoint == "" {
		ep.S3AgentCredentials = filepath.Join(dir, agentCredFile)
	}
	b, _ := json.MarshalIndent(ep, "", "  ")
	if err := atomicfile.Write(filepath.Join(dir, "endpoints.json"), b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, `
Trainyard dev is running (data in %s)

  API          %s
  API docs     %s
  Dashboard    %s   (sign in with the admin token)
  Temporal UI  %s   (%s)
  Temporal     %s (namespace default)
  S3           %s (bucket %s)

  S3 credentials  %s
  Admin token     %s   (use: export TRAINYARD_TOKEN=$(cat %s))

Stop with Ctrl-C (SIGINT) or SIGTERM.
`, dir, ep.API, ep.Docs, ep.Dashboard, ep.TemporalUI, uiMode(o.uiWrites), ep.Temporal, ep.S3, ep.Bucket, credFile, adminFile, adminFile)

	<-ctx.Done()
	log.Info("shutting down")
	return nil
}
