package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/workflows/job"
)

func newJobCmd() *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{Use: "job", Short: "Run commands on cluster nodes with assigned CPUs and GPUs"}
	addClientFlags(cmd, cf)
	var clusterName string
	var cpus float64
	var gpus int
	var mem int64
	submit := &cobra.Command{
		Use:   "submit --cluster NAME [--gpus N] -- COMMAND [ARGS...]",
		Short: "Place a command on a node and run it there",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var ref struct {
				WorkflowID string `json:"workflow_id"`
			}
			body := map[string]any{"command": args, "cpus": cpus, "gpus": gpus, "memory_mb": mem}
			if err := c.JSON(cmd.Context(), http.MethodPost, "/v1/clusters/"+url.PathEscape(clusterName)+"/jobs", body, &ref); err != nil {
				return err
			}
			fmt.Fprintln(os.Stdout, ref.WorkflowID)
			return nil
		},
	}
	submit.Flags().StringVar(&clusterName, "cluster", "", "cluster to run on")
	submit.Flags().Float64Var(&cpus, "cpus", 1, "CPUs the job needs")
	submit.Flags().IntVar(&gpus, "gpus", 0, "GPUs the job needs")
	submit.Flags().Int64Var(&mem, "memory-mb", 0, "memory the job needs")
	_ = submit.MarkFlagRequired("cluster")

	show := &cobra.Command{
		Use: "show ID", Short: "A job's state, node, GPUs and why it waits", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var out struct {
				WorkflowID string       `json:"workflow_id"`
				Status     string       `json:"status"`
				Progress   job.Progress `json:"progress"`
				Result     *job.Result  `json:"result,omitempty"`
				Error      string       `json:"error,omitempty"`
			}
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/jobs/"+url.PathEscape(args[0]), nil, &out); err != nil {
				return err
			}
			return cf.print(os.Stdout, out, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "job\t%s\nstatus\t%s\nstate\t%s\nnode\t%s\ngpus\t%v\nplacements\t%d\n", out.WorkflowID, out.Status, out.Progress.State, out.Progress.Node, out.Progress.GPUs, out.Progress.Placements)
				if out.Progress.Reason != "" {
					fmt.Fprintf(w, "waiting because\t%s\n", out.Progress.Reason)
				}
				if out.Error != "" {
					fmt.Fprintf(w, "error\t%s\n", out.Error)
				}
				if out.Result != nil {
					fmt.Fprintf(w, "exit code\t%d\n", out.Result.ExitCode)
				}
			})
		},
	}
	cmd.AddCommand(submit, show)
	return cmd
}
