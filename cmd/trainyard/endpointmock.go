package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/inference/inferencetest"
	"github.com/trainyard/trainyard/plugins/arithmetic/model"
)

// checkpointURI is the run and version in a weight-sync URI
// (s3://bucket/<prefix>/runs/<run>/<seq>/manifest.json).
var checkpointURI = regexp.MustCompile(`/runs/([^/]+)/0*([0-9]+)/manifest\.json$`)

// newEndpointMockCmd serves the arithmetic model as an OpenAI-compatible
// endpoint, for trying the LLM loop without a model server.
func newEndpointMockCmd() *cobra.Command {
	cf := &clientFlags{}
	var addr, name string
	var latency time.Duration
	cmd := &cobra.Command{
		Use:   "mock [--listen 127.0.0.1:8000] [--model arith-1b] [--latency 50ms]",
		Short: "Serve a stand-in LLM for the arithmetic env's loop (OpenAI-compatible, weight sync by webhook)",
		Long: "mock serves GET /v1/models and POST /v1/chat/completions with a one-weight model of arithmetic\n" +
			"(plugins/arithmetic/model): it works a problem out, and gets it right, with a probability its weight\n" +
			"sets, else answers at once and wrongly. POST /admin/reload is its weight-sync webhook (endpoint type\n" +
			"webhook, reload_url http://ADDR/admin/reload): it downloads the published checkpoint's policy.json\n" +
			"through the Trainyard API (--url, --token as for other commands) and serves it. Ctrl-C stops it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			llm := model.New(uint64(time.Now().UnixNano()))
			srv, err := inferencetest.Listen(addr, name)
			if err != nil {
				return err
			}
			defer srv.Close()
			srv.SetLatency(latency)
			srv.Answer = func(msgs []inference.ChatMessage) string { return llm.Answer(msgs[len(msgs)-1].Content) }
			srv.OnReload = func(rl inferencetest.Reload) error {
				m := checkpointURI.FindStringSubmatch(rl.URI)
				if m == nil {
					return fmt.Errorf("weights %q: not a Trainyard checkpoint URI", rl.URI)
				}
				if seq, _ := strconv.ParseInt(m[2], 10, 64); seq != rl.Version {
					return fmt.Errorf("weights %q: version %d in the URI, %d in the notification", rl.URI, seq, rl.Version)
				}
				var b []byte
				path := fmt.Sprintf("/v1/runs/%s/checkpoints/%d/files/policy.json", url.PathEscape(m[1]), rl.Version)
				if err := c.Do(cmd.Context(), http.MethodGet, path, nil, "", &b); err != nil {
					return fmt.Errorf("download weights v%d: %w", rl.Version, err)
				}
				if err := llm.Load(b); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "loaded weights v%d of %s: p(work it out) %.3f\n", rl.Version, m[1], llm.PWork())
				return nil
			}
			fmt.Fprintf(os.Stderr, "serving model %s at %s (reload_url %s/admin/reload)\n", name, srv.URL, srv.URL)
			<-cmd.Context().Done()
			return nil
		},
	}
	addClientFlags(cmd, cf)
	cmd.Flags().StringVar(&addr, "listen", "127.0.0.1:8000", "address to serve on")
	cmd.Flags().StringVar(&name, "model", "arith-1b", "the model name /v1/models lists")
	cmd.Flags().DurationVar(&latency, "latency", 0, "delay every chat completion by this much (an LLM's time to answer)")
	return cmd
}
