package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/inference"
)

// newEndpointCmd checks the inference endpoints a cluster spec declares,
// from the machine it runs on (run it on a node to see what its plugins
// will see). Credentials come from the endpoints' credentials_ref there.
func newEndpointCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "endpoint", Short: "Check a cluster's inference endpoints (OpenAI-compatible)"}
	var timeout time.Duration
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 10*time.Second, "per-endpoint timeout")
	check := &cobra.Command{
		Use:   "check SPEC.yaml [NAME...]",
		Short: "Health-check endpoints (GET /v1/models lists the declared model); non-zero exit if any is down",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := spec.ParseFile(args[0])
			if err != nil {
				return err
			}
			return checkEndpoints(cmd.Context(), os.Stdout, c, args[1:], timeout)
		},
	}
	chat := &cobra.Command{
		Use:   "chat SPEC.yaml NAME PROMPT",
		Short: "Send one chat completion to an endpoint and print the answer",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := spec.ParseFile(args[0])
			if err != nil {
				return err
			}
			return chatEndpoint(cmd.Context(), os.Stdout, c, args[1], args[2], timeout)
		},
	}
	cf := &clientFlags{}
	status := &cobra.Command{
		Use:   "status CLUSTER",
		Short: "A running cluster's inference endpoints and their health, checked by the control plane",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var out struct {
				Cluster   string               `json:"cluster"`
				Endpoints []api.EndpointHealth `json:"endpoints"`
			}
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/clusters/"+url.PathEscape(args[0])+"/endpoints", nil, &out); err != nil {
				return err
			}
			return cf.print(os.Stdout, out, func(w *tabwriter.Writer) { endpointTable(w, out.Endpoints) })
		},
	}
	addClientFlags(status, cf)
	cmd.AddCommand(check, chat, status, newEndpointMockCmd())
	return cmd
}

// endpointTable lists endpoints with their health (endpoint status and
// the bottom of cluster status).
func endpointTable(w io.Writer, eps []api.EndpointHealth) {
	fmt.Fprintln(w, "ENDPOINT\tURL\tMODEL\tSERVED BY\tHEALTHY\tLATENCY\tERROR")
	for _, e := range eps {
		by := strings.Join(e.Nodes, ",")
		if e.GPUs > 0 {
			by += fmt.Sprintf(" (%d GPU/node)", e.GPUs)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%v\t%.0fms\t%s\n", e.Name, e.URL, e.Model, by, e.Healthy, e.LatencyMS, e.Error)
	}
}

func checkEndpoints(ctx context.Context, w io.Writer, c *spec.Cluster, names []string, timeout time.Duration) error {
	if len(c.Endpoints) == 0 {
		return fmt.Errorf("cluster %s declares no endpoints", c.Name)
	}
	want := map[string]bool{}
	for _, n := range names {
		if _, ok := c.Endpoint(n); !ok {
			return fmt.Errorf("cluster %s has no endpoint %q", c.Name, n)
		}
		want[n] = true
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tMODEL\tHEALTHY\tLATENCY\tSERVES\tERROR")
	var down []string
	for _, e := range c.Endpoints {
		if len(want) > 0 && !want[e.Name] {
			continue
		}
		cl, err := inference.NewClient(e, inference.ClientOptions{})
		var h inference.Health
		if err != nil {
			h = inference.Health{Endpoint: e.Name, Error: err.Error()}
		} else {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			h = cl.Check(cctx)
			cancel()
		}
		if !h.Healthy {
			down = append(down, e.Name)
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%s\t%s\n", e.Name, e.Model, h.Healthy, h.Latency.Round(time.Millisecond), strings.Join(h.Models, ","), h.Error)
	}
	tw.Flush()
	if len(down) > 0 {
		return fmt.Errorf("endpoints down: %s", strings.Join(down, ", "))
	}
	return nil
}

func chatEndpoint(ctx context.Context, w io.Writer, c *spec.Cluster, name, prompt string, timeout time.Duration) error {
	e, ok := c.Endpoint(name)
	if !ok {
		return fmt.Errorf("cluster %s has no endpoint %q", c.Name, name)
	}
	cl, err := inference.NewClient(e, inference.ClientOptions{Retry: inference.Retry{AttemptTimeout: timeout}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cr, resp, err := cl.Chat(ctx, []inference.ChatMessage{{Role: "user", Content: prompt}}, 1<<20)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, cr.Choices[0].Message.Content)
	fmt.Fprintf(os.Stderr, "(%s, %d prompt + %d completion tokens, %d attempts)\n", cr.Model, cr.Usage.PromptTokens, cr.Usage.CompletionTokens, resp.Attempts)
	return nil
}
