package main

import (
	"net/http"
	"net/url"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// daemonCLI talks to one kind of self-play daemon (the scheduler, the idle
// daemon, the populator): POST path starts it, GET path/CLUSTER shows it,
// POST path/CLUSTER/stop stops it; each answer is its view V, printed
// with table.
type daemonCLI[V any] struct {
	cf    *clientFlags
	path  string
	table func(*tabwriter.Writer, V)
}

// call sends body to path+suffix and prints the view it answers with.
func (d daemonCLI[V]) call(cmd *cobra.Command, method, suffix string, body any) error {
	c, err := d.cf.client()
	if err != nil {
		return err
	}
	var v V
	if err := c.JSON(cmd.Context(), method, d.path+suffix, body, &v); err != nil {
		return err
	}
	return d.cf.print(os.Stdout, v, func(w *tabwriter.Writer) { d.table(w, v) })
}

// start starts the daemon with req.
func (d daemonCLI[V]) start(cmd *cobra.Command, req any) error {
	return d.call(cmd, http.MethodPost, "", req)
}

// showStop are its `show CLUSTER` and `stop CLUSTER` commands.
func (d daemonCLI[V]) showStop(showShort, stopShort string) []*cobra.Command {
	return []*cobra.Command{
		{Use: "show CLUSTER", Short: showShort, Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
			return d.call(cmd, http.MethodGet, "/"+url.PathEscape(args[0]), nil)
		}},
		{Use: "stop CLUSTER", Short: stopShort, Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
			return d.call(cmd, http.MethodPost, "/"+url.PathEscape(args[0])+"/stop", nil)
		}},
	}
}
