package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/atomicfile"
	"github.com/trainyard/trainyard/internal/embedded"
)

// s3Endpoint is what `trainyard s3` writes to DATA/s3-endpoint.json.
type s3Endpoint struct {
	S3            string `json:"s3"`
	S3Credentials string `json:"s3_credentials_file"`
}

// newS3Cmd serves dev's embedded S3 gateway as a process of its own, so it
// can be stopped (or killed) without the control plane: `trainyard dev
// --s3-endpoint` then uses it instead of starting one inside.
func newS3Cmd(g *globals) *cobra.Command {
	var dataDir, ip string
	var port int
	cmd := &cobra.Command{
		Use:   "s3",
		Short: "Serve the embedded S3 gateway on its own (for `dev --s3-endpoint`)",
		Long: "s3 serves the same S3 gateway `dev` embeds (versitygw, POSIX backend) from --data-dir/s3, with the\n" +
			"root keys in --data-dir/s3-credentials.json (generated on first start). Give its address to\n" +
			"`trainyard dev --s3-endpoint http://HOST:PORT --data-dir` the same directory.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, log, done, err := g.boot(cmd.Context(), "trainyard-s3")
			if err != nil {
				return err
			}
			defer done()
			return runS3(ctx, dataDir, ip, port, func(ep s3Endpoint) {
				log.Info("s3 listening", "endpoint", ep.S3)
				fmt.Fprintf(os.Stdout, "S3 %s (credentials %s). Stop with Ctrl-C.\n", ep.S3, ep.S3Credentials)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", ".trainyard", "directory holding s3/ and s3-credentials.json")
	f.StringVar(&ip, "ip", "127.0.0.1", "address to bind")
	f.IntVar(&port, "port", 9000, "port (0 picks a free one)")
	return cmd
}

func runS3(ctx context.Context, dataDir, ip string, port int, started func(s3Endpoint)) error {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	credFile := filepath.Join(dir, "s3-credentials.json")
	creds, err := embedded.LoadOrCreateS3Credentials(credFile)
	if err != nil {
		return err
	}
	s3, err := embedded.StartS3(ip, port, filepath.Join(dir, "s3"), creds)
	if err != nil {
		return err
	}
	defer s3.Stop()
	ep := s3Endpoint{S3: "http://" + s3.Endpoint, S3Credentials: credFile}
	b, _ := json.MarshalIndent(ep, "", "  ")
	if err := atomicfile.Write(filepath.Join(dir, "s3-endpoint.json"), b, 0o644); err != nil {
		return err
	}
	started(ep)
	<-ctx.Done()
	return nil
}
