package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/trainyard/trainyard/internal/apiclient"
)

// clientFlags are shared by every command that talks to the API.
type clientFlags struct {
	url     string
	token   string
	dataDir string
	output  string
}

func addClientFlags(cmd *cobra.Command, f *clientFlags) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.url, "url", "", "Trainyard API URL (default: the one `trainyard dev --data-dir` wrote, else http://127.0.0.1:8080)")
	pf.StringVar(&f.token, "token", "", "API token (default: TRAINYARD_TOKEN, else the dev admin token in --data-dir)")
	pf.StringVar(&f.dataDir, "data-dir", ".trainyard", "a `trainyard dev` data dir to find the URL and admin token in")
	pf.StringVarP(&f.output, "output", "o", "table", "table, json or yaml")
}

// client resolves URL and token: flag or env first, then a local dev
// data dir, so `make run` in one terminal and the CLI in another just work.
func (f *clientFlags) client() (*apiclient.Client, error) {
	switch f.output {
	case "table", "json", "yaml":
	default:
		return nil, fmt.Errorf("--output %q: want table, json or yaml", f.output)
	}
	url, token := f.url, f.token
	if token == "" {
		token = os.Getenv("TRAINYARD_TOKEN")
	}
	if url == "" || token == "" {
		if b, err := os.ReadFile(filepath.Join(f.dataDir, "endpoints.json")); err == nil {
			var ep Endpoints
			if json.Unmarshal(b, &ep) == nil {
				if url == "" {
					url = ep.API
				}
				if token == "" {
					if t, err := os.ReadFile(ep.AdminTokenFile); err == nil {
						token = strings.TrimSpace(string(t))
					}
				}
			}
		}
	}
	if url == "" {
		url = "http://127.0.0.1:8080"
	}
	return apiclient.New(url, token), nil
}

// print writes v as JSON or YAML, or calls table for the table view.
func (f *clientFlags) print(w io.Writer, v any, table func(*tabwriter.Writer)) error {
	switch f.output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		// Through JSON so field names match the API's.
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var generic any
		if err := json.Unmarshal(b, &generic); err != nil {
			return err
		}
		return yaml.NewEncoder(w).Encode(generic)
	default:
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		table(tw)
		return tw.Flush()
	}
}
