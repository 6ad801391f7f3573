package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/trainyard/trainyard/workflows/job"
)

func newJobCmd() *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{Use: "job", Short: "Run commands on cluster nodes with assigned CPUs and GPUs"}
	addClientFlags(cmd, cf)
	var clusterName, file, kind, quotaConfig string
	var cpus float64
	var gpus, priority int
	var mem int64
	submit := &cobra.Command{
		Use:   "submit --cluster NAME [--gpus N] -- COMMAND [ARGS...] | submit --cluster NAME -f job.yaml",
		Short: "Place a command, or a multi-role job described in a file, on the cluster's nodes and run it",
		Long: "With -f, the file is a work description (docs/scheduling.md): kind, config, priority, roles with count, cpus,\n" +
			"gpus, memory_mb, max_concurrency, group, affinity and command, groups with their strategy. Its roles are placed\n" +
			"all-or-nothing as one gang and every instance runs its role's command (COMMAND, if given, for roles without one).",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var ref struct {
				WorkflowID string `json:"workflow_id"`
			}
			if file != "" {
				body, err := workJobBody(file, clusterName, args)
				if err != nil {
					return err
				}
				if err := c.JSON(cmd.Context(), http.MethodPost, "/v1/jobs", body, &ref); err != nil {
					return err
				}
				fmt.Fprintln(os.Stdout, ref.WorkflowID)
				return nil
			}
			if len(args) == 0 {
				return fmt.Errorf("job submit: give a COMMAND after --, or a job file with -f")
			}
			body := map[string]any{"command": args, "cpus": cpus, "gpus": gpus, "memory_mb": mem}
			path := "/v1/clusters/" + url.PathEscape(clusterName) + "/jobs"
			if kind != "" || quotaConfig != "" || priority != 0 {
				// A plain command with a kind, quota key or priority is a
				// one-role work description.
				role := map[string]any{"name": "job", "count": 1, "cpus": cpus, "gpus": gpus, "memory_mb": mem}
				body = map[string]any{"cluster": clusterName, "kind": kind, "config": quotaConfig, "priority": priority, "command": args, "roles": []any{role}}
				path = "/v1/jobs"
			}
			if err := c.JSON(cmd.Context(), http.MethodPost, path, body, &ref); err != nil {
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
	submit.Flags().StringVarP(&file, "file", "f", "", "a work description (YAML or JSON) of a multi-role job")
	submit.Flags().StringVar(&kind, "kind", "", "work kind: job (default), training, selfplay, evaluation, rollout")
	submit.Flags().StringVar(&quotaConfig, "quota-config", "", "quota key, e.g. a game config (hexagonal_2p)")
	submit.Flags().IntVar(&priority, "priority", 0, "higher places first among waiting work")
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
				fmt.Fprintf(w, "job\t%s\nstatus\t%s\nstate\t%s\n", out.WorkflowID, out.Status, out.Progress.State)
				if len(out.Progress.Instances) == 0 { // a gang lists each instance's node below
					fmt.Fprintf(w, "node\t%s\ngpus\t%v\n", out.Progress.Node, out.Progress.GPUs)
				}
				fmt.Fprintf(w, "placements\t%d\n", out.Progress.Placements)
				if out.Progress.Reason != "" {
					fmt.Fprintf(w, "waiting because\t%s\n", out.Progress.Reason)
				}
				if out.Error != "" {
					fmt.Fprintf(w, "error\t%s\n", out.Error)
				}
				if out.Result != nil {
					fmt.Fprintf(w, "exit code\t%d\n", out.Result.ExitCode)
				}
				for _, in := range out.Progress.Instances {
					line := fmt.Sprintf("%s on %s gpus %v exit %d", in.State, in.Node, in.GPUs, in.ExitCode)
					if in.MaxConcurrency > 0 {
						line += fmt.Sprintf(" max_concurrency %d", in.MaxConcurrency)
					}
					fmt.Fprintf(w, "%s#%d\t%s %s\n", in.Role, in.Instance, line, in.Error)
				}
			})
		},
	}
	cmd.AddCommand(submit, show, newJobLogsCmd(cf))
	return cmd
}

// workJobBody reads a job file (YAML or JSON) into the body of POST
// /v1/jobs: the file as written, the cluster, and args as the default
// command. The server checks it and names each bad field.
func workJobBody(file, clusterName string, args []string) (map[string]any, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var body map[string]any
	if err := yaml.Unmarshal(raw, &body); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	body["cluster"] = clusterName
	if len(args) > 0 {
		body["command"] = args
	}
	return body, nil
}
