package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/telemetry"
	"github.com/trainyard/trainyard/internal/temporalx"
)

type workerOptions struct {
	temporal temporalx.Options
	s3       objstore.Config
	wasmDir  string
	agents   agentLaunch
}

func newWorkerCmd(g *globals) *cobra.Command {
	o := &workerOptions{}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the control-plane Temporal worker against an external Temporal and S3",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runWorker(cmd.Context(), g, o) },
	}
	addTemporalFlags(cmd.Flags(), &o.temporal)
	addS3Flags(cmd.Flags(), &o.s3)
	addPluginFlags(cmd.Flags(), &o.wasmDir)
	addAgentFlags(cmd.Flags(), &o.agents, "/var/lib/trainyard/agents")
	return cmd
}

func runWorker(ctx context.Context, g *globals, o *workerOptions) error {
	log, err := g.logger()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutdownOTel, err := telemetry.Setup(ctx, "trainyard-worker")
	if err != nil {
		return err
	}
	defer shutdownOTel(context.Background())
	o.temporal.Logger = log
	tc, err := temporalx.Dial(ctx, o.temporal)
	if err != nil {
		return err
	}
	defer tc.Close()
	store, err := objstore.Open(ctx, o.s3)
	if err != nil {
		return err
	}
	rt, err := newPluginRuntime(ctx, o.wasmDir)
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())
	if o.agents.temporalAddr == "" {
		o.agents.temporalAddr = o.temporal.Address
	}
	o.agents.namespace = o.temporal.Namespace
	w, err := startWorker(tc, store, rt, o.agents)
	if err != nil {
		return err
	}
	log.Info("control worker polling", "temporal", o.temporal.Address)
	<-ctx.Done()
	w.Stop()
	return nil
}
