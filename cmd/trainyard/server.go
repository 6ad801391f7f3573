package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/admission"
	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/temporalx"
)

type serverOptions struct {
	listen         string
	tokensFile     string
	adminTokenFile string
	temporal       temporalx.Options
	s3             objstore.Config
	wasmDir        string
	temporalUI     string
}

func newServerCmd(g *globals) *cobra.Command {
	o := &serverOptions{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the REST API against an external Temporal and S3",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runServer(cmd.Context(), g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "API listen address")
	f.StringVar(&o.tokensFile, "tokens-file", "/var/lib/trainyard/tokens.json", "hashed API tokens")
	f.StringVar(&o.adminTokenFile, "admin-token-file", "/var/lib/trainyard/admin.token", "where the first admin token is written when the token store is empty")
	f.StringVar(&o.temporalUI, "temporal-ui-url", "", "the Temporal Web UI's base URL (e.g. https://temporal.internal:8233); the dashboard at /ui links each workflow there")
	addTemporalFlags(f, &o.temporal)
	addS3Flags(f, &o.s3)
	addPluginFlags(f, &o.wasmDir)
	return cmd
}

func runServer(ctx context.Context, g *globals, o *serverOptions) error {
	ctx, log, done, err := g.boot(ctx, "trainyard-server")
	if err != nil {
		return err
	}
	defer done()

	tc, store, rt, closeAll, err := connect(ctx, log, o.temporal, o.s3, o.wasmDir)
	if err != nil {
		return err
	}
	defer closeAll()
	tokens, err := auth.Open(o.tokensFile)
	if err != nil {
		return err
	}
	if created, err := ensureAdminToken(tokens, o.adminTokenFile); err != nil {
		return err
	} else if created {
		log.Info("created the first admin token", "file", o.adminTokenFile)
	}
	adm, err := admission.Open(ctx, store)
	if err != nil {
		return err
	}
	go adm.Watch(ctx, policyRefresh, log) // bundles pushed through another replica
	plugins, err := openPluginStore(ctx, store, log)
	if err != nil {
		return err
	}
	srv := api.New(api.Deps{Temporal: tc, Namespace: o.temporal.Namespace, Tokens: tokens, Store: store, Logger: log,
		Plugins: rt, PluginStore: plugins, Admission: adm,
		Metrics: g.telemetry.Metrics, Ready: readyChecks(tc, store), TemporalUI: o.temporalUI,
		AgentTemporal: o.temporal.Address, AgentS3: s3URL(o.s3), AgentS3Bucket: o.s3.Bucket})
	as, err := serveAPI(o.listen, srv.Handler(), log)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "Trainyard API on %s (docs %s/docs, dashboard %s/ui)\n", as.URL, as.URL, as.URL)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	as.Stop(sctx)
	return nil
}
