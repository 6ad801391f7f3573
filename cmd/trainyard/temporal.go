package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/atomicfile"
	"github.com/trainyard/trainyard/internal/embedded"
)

// startTemporal starts the embedded Temporal server with its state in dir
// (temporal.db; the internal ports it picked kept in temporal-ports.json)
// and Trainyard's search attributes: `dev`'s, and `trainyard temporal`'s.
func startTemporal(dir, ip string, port int, namespace string, log *slog.Logger) (*embedded.Temporal, error) {
	return embedded.StartTemporal(embedded.TemporalOptions{
		DatabaseFile:     filepath.Join(dir, "temporal.db"),
		IP:               ip,
		FrontendPort:     port,
		Namespaces:       []string{namespace},
		SearchAttributes: searchAttributes,
		Logger:           log.With("component", "temporal-server"),
		DynamicConfig:    embedded.DefaultDynamicConfig(),
		PortsFile:        filepath.Join(dir, "temporal-ports.json"),
	})
}

// temporalEndpoint is what `trainyard temporal` writes to
// DATA/temporal-endpoint.json.
type temporalEndpoint struct {
	Temporal  string `json:"temporal"`
	Namespace string `json:"namespace"`
}

// newTemporalCmd serves dev's embedded Temporal server (SQLite, with the
// search attributes Trainyard's workflows set) as a process of its own,
// for `server` and `worker` replicas to share on a small installation
// without a Temporal cluster of its own, and for the production topology's
// tests. A real Temporal (self-hosted cluster, Temporal Cloud) needs the
// same search attributes (docs/deploy: `temporal operator
// search-attribute create`).
func newTemporalCmd(g *globals) *cobra.Command {
	var dataDir, ip, namespace string
	var port int
	cmd := &cobra.Command{
		Use:   "temporal",
		Short: "Serve the embedded Temporal server on its own (for `server` and `worker` replicas)",
		Long: "temporal serves the Temporal server `dev` embeds (SQLite in --data-dir/temporal.db) with Trainyard's\n" +
			"namespace and search attributes, and writes its address to --data-dir/temporal-endpoint.json.\n" +
			"Point `trainyard server`, `trainyard worker` and agents at it with --temporal-address.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, log, done, err := g.boot(cmd.Context(), "trainyard-temporal")
			if err != nil {
				return err
			}
			defer done()
			dir, err := filepath.Abs(dataDir)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("data dir: %w", err)
			}
			srv, err := startTemporal(dir, ip, port, namespace, log)
			if err != nil {
				return err
			}
			defer func() { _ = srv.Stop() }()
			b, _ := json.MarshalIndent(temporalEndpoint{Temporal: srv.Address, Namespace: namespace}, "", "  ")
			if err := atomicfile.Write(filepath.Join(dir, "temporal-endpoint.json"), b, 0o644); err != nil {
				return err
			}
			log.Info("temporal listening", "address", srv.Address, "namespace", namespace)
			fmt.Fprintf(os.Stdout, "Temporal %s (namespace %s). Stop with Ctrl-C.\n", srv.Address, namespace)
			<-ctx.Done()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", ".trainyard-temporal", "directory holding temporal.db")
	f.StringVar(&ip, "ip", "127.0.0.1", "address to bind")
	f.IntVar(&port, "port", 7233, "frontend gRPC port (0 picks a free one)")
	f.StringVar(&namespace, "namespace", "default", "namespace to create")
	return cmd
}
