// Command trainyard is the single binary: `dev` runs everything in one
// process, `server` and `worker` run the control plane against external
// Temporal and S3, and the remaining subcommands are clients.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/config"
	"github.com/trainyard/trainyard/internal/telemetry"
)

func main() {
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
	root.AddCommand(newDevCmd(g), newServerCmd(g), newWorkerCmd(g), newOpenAPICmd(), newTokenCmd(), newPluginCmd(), newAgentCmd(g), newClusterCmd(), newJobCmd(), newPolicyCmd())
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
