// Command trainyard is the single binary: `dev` runs everything in one
// process, `server` and `worker` run the control plane against external
// Temporal and S3, and the remaining subcommands are clients.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/config"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/telemetry"
)

func main() {
	// A plugin worker process (pluginhost.NewWorkerVecEnv) is this binary
	// re-run; it serves and exits here.
	pluginhost.ServeWorkerIfChild()
	if err := newRoot().Execute(); err != nil {
		// One readable line; cobra's own usage dump is silenced.
		fmt.Fprintln(os.Stderr, "trainyard: "+strings.TrimSpace(err.Error()))
		os.Exit(1)
	}
}

type globals struct {
	configFile string
	logLevel   string
	logFormat  string
	telemetry  *telemetry.Telemetry // set by boot
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "trainyard",
		Short:         "Train RL agents and self-play bots on messy clusters",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			file := g.configFile
			if file == "" {
				file = os.Getenv("TRAINYARD_CONFIG")
			}
			return config.Apply(cmd.Flags(), file, os.LookupEnv)
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.configFile, "config", "", "YAML config file (keys are flag names); env TRAINYARD_CONFIG")
	pf.StringVar(&g.logLevel, "log-level", "info", "debug, info, warn or error")
	pf.StringVar(&g.logFormat, "log-format", "text", "text or json")
	root.AddCommand(newDevCmd(g), newServerCmd(g), newWorkerCmd(g), newOpenAPICmd(), newTokenCmd(), newPluginCmd(), newAgentCmd(g), newClusterCmd(), newJobCmd(), newPolicyCmd(), newRunCmd(), newSweepCmd())
	root.AddCommand(newS3Cmd(g), newTemporalCmd(g), newStatusCmd())
	root.AddCommand(newSelfplayCmd())
	root.AddCommand(newEndpointCmd(), newUsageCmd(), newEnvCmd(g))
	return root
}

func (g *globals) logger() (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	if g.logFormat != "text" && g.logFormat != "json" {
		return nil, fmt.Errorf("--log-format %q: want text or json", g.logFormat)
	}
	return telemetry.NewLogger(os.Stderr, lvl, g.logFormat == "json"), nil
}

// boot does what every long-running command does first: a logger, a context
// cancelled by SIGINT/SIGTERM, and OpenTelemetry for service (kept in
// g.telemetry for the /metrics endpoint). done undoes it.
func (g *globals) boot(ctx context.Context, service string) (context.Context, *slog.Logger, func(), error) {
	log, err := g.logger()
	if err != nil {
		return ctx, nil, nil, err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	tel, err := telemetry.Setup(ctx, service)
	if err != nil {
		stop()
		return ctx, nil, nil, err
	}
	g.telemetry = tel
	servePprof(log, service)
	return ctx, log, func() {
		_ = tel.Shutdown(context.Background())
		stop()
	}, nil
}
