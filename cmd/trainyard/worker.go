package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/admission"
	"github.com/trainyard/trainyard/internal/objstore"
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
	ctx, log, done, err := g.boot(ctx, "trainyard-worker")
	if err != nil {
		return err
	}
	defer done()
	tc, store, rt, closeAll, err := connect(ctx, log, o.temporal, o.s3, o.wasmDir)
	if err != nil {
		return err
	}
	defer closeAll()
	if o.agents.temporalAddr == "" {
		o.agents.temporalAddr = o.temporal.Address
	}
	o.agents.namespace = o.temporal.Namespace
	o.agents.s3 = o.s3
	// Placements use the params of the bundle in force, pushed through a
	// server and picked up here within policyRefresh.
	adm, err := admission.Open(ctx, store)
	if err != nil {
		return err
	}
	go adm.Watch(ctx, policyRefresh, log)
	w, err := startWorker(tc, store, rt, o.agents, adm)
	if err != nil {
		return err
	}
	log.Info("control worker polling", "temporal", o.temporal.Address)
	<-ctx.Done()
	w.Stop()
	return nil
}
