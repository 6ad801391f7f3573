package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/apiclient"
	"github.com/trainyard/trainyard/workflows/cluster"
)

func newClusterCmd() *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{Use: "cluster", Short: "Bring clusters up and down, add and remove nodes, show status"}
	addClientFlags(cmd, cf)

	var file string
	var wait bool
	var hbTimeout time.Duration
	up := &cobra.Command{
		Use:   "up -f SPEC.yaml",
		Short: "Start every node's agent and wait until each registers (running it again is a no-op)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			path := "/v1/clusters"
			if hbTimeout > 0 {
				path += "?heartbeat_timeout=" + url.QueryEscape(hbTimeout.String())
			}
			var ref struct {
				Cluster string    `json:"cluster"`
				Join    *joinInfo `json:"join"`
			}
			if err := c.Do(cmd.Context(), http.MethodPost, path, strings.NewReader(string(data)), "application/yaml", &ref); err != nil {
				return fmt.Errorf("cluster up %s: %w", file, err)
			}
			if ref.Join != nil {
				printJoin(os.Stderr, ref.Cluster, ref.Join)
			}
			if !wait {
				fmt.Fprintf(os.Stderr, "cluster %s: up requested\n", ref.Cluster)
				return nil
			}
			st, err := waitSettled(cmd.Context(), c, ref.Cluster)
			if err != nil {
				return err
			}
			if err := cf.print(os.Stdout, st, func(w *tabwriter.Writer) { clusterTable(w, st) }); err != nil {
				return err
			}
			if n := st.Totals.ByHealth[cluster.Failed]; n > 0 {
				return fmt.Errorf("cluster %s: %d node(s) failed to come up (see ERROR above)", ref.Cluster, n)
			}
			return nil
		},
	}
	up.Flags().StringVarP(&file, "file", "f", "", "cluster spec (YAML or JSON)")
	up.Flags().BoolVar(&wait, "wait", true, "wait until every node registered or failed, showing progress")
	up.Flags().DurationVar(&hbTimeout, "heartbeat-timeout", 0, "a node silent this long is Dead (default 15s)")
	_ = up.MarkFlagRequired("file")

	var maxAge time.Duration
	status := &cobra.Command{
		Use:   "status NAME",
		Short: "Per-node health and resources, like `ray status`",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var st cluster.Status
			path := "/v1/clusters/" + url.PathEscape(args[0])
			if maxAge > 0 {
				path += fmt.Sprintf("?max_age_s=%g", maxAge.Seconds())
			}
			if err := c.JSON(cmd.Context(), http.MethodGet, path, nil, &st); err != nil {
				return err
			}
			var q queue
			qerr := c.JSON(cmd.Context(), http.MethodGet, "/v1/clusters/"+url.PathEscape(args[0])+"/queue", nil, &q)
			return cf.print(os.Stdout, st, func(w *tabwriter.Writer) {
				if st.AgeS > 0 {
					fmt.Fprintf(w, "(the cluster is busy: its status as of %.1fs ago; --max-age 0 waits for a fresh one)\n", st.AgeS)
				}
				clusterTable(w, st)
				if len(st.Endpoints) > 0 { // health is checked now, only for the table
					var eps struct {
						Endpoints []api.EndpointHealth `json:"endpoints"`
					}
					if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/clusters/"+url.PathEscape(args[0])+"/endpoints", nil, &eps); err == nil {
						fmt.Fprintln(w)
						endpointTable(w, eps.Endpoints)
					}
				}
				if qerr == nil && len(q.Waiting) > 0 {
					fmt.Fprintln(w)
					queueTable(w, q)
				}
			})
		},
	}

	status.Flags().DurationVar(&maxAge, "max-age", 10*time.Second, "when the cluster takes over 400 ms to answer, show its last status if it is at most this old (at most 30s; 0 always waits for a fresh one)")

	queueCmd := &cobra.Command{
		Use:   "queue NAME",
		Short: "Work waiting for the cluster's nodes, longest first, with why each waits",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var q queue
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/clusters/"+url.PathEscape(args[0])+"/queue", nil, &q); err != nil {
				return err
			}
			return cf.print(os.Stdout, q, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "cluster %s: %d running, %d waiting\n", q.Cluster, q.Running, len(q.Waiting))
				if len(q.Waiting) > 0 {
					queueTable(w, q)
				}
			})
		},
	}

	simple := func(use, short, suffix string) *cobra.Command {
		return &cobra.Command{
			Use: use + " NAME", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				if err := c.JSON(cmd.Context(), http.MethodPost, "/v1/clusters/"+url.PathEscape(args[0])+suffix, nil, nil); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "cluster %s: %s requested (follow with `trainyard cluster status %s`)\n", args[0], use, args[0])
				return nil
			},
		}
	}

	nodes := &cobra.Command{Use: "nodes", Short: "Add or remove nodes of a running cluster"}
	var nodeFile string
	add := &cobra.Command{
		Use: "add NAME -f NODE.yaml", Short: "Add a node (one entry of a spec's nodes list) and start its agent", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(nodeFile)
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			return c.Do(cmd.Context(), http.MethodPost, "/v1/clusters/"+url.PathEscape(args[0])+"/nodes", strings.NewReader(string(data)), "application/yaml", nil)
		},
	}
	add.Flags().StringVarP(&nodeFile, "file", "f", "", "node spec (YAML or JSON)")
	_ = add.MarkFlagRequired("file")
	remove := &cobra.Command{
		Use: "remove NAME NODE", Short: "Drain a node, stop its agent and remove it", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			return c.JSON(cmd.Context(), http.MethodDelete, "/v1/clusters/"+url.PathEscape(args[0])+"/nodes/"+url.PathEscape(args[1]), nil, nil)
		},
	}
	var deadline time.Duration
	drainNode := func(verb, short string) *cobra.Command {
		c := &cobra.Command{
			Use: verb + " NAME NODE", Short: short, Args: cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				path := "/v1/clusters/" + url.PathEscape(args[0]) + "/nodes/" + url.PathEscape(args[1]) + "/" + verb
				if verb == "drain" {
					path += "?deadline=" + url.QueryEscape(deadline.String())
				}
				if err := c.JSON(cmd.Context(), http.MethodPost, path, nil, nil); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "node %s: %s requested (see `trainyard cluster status %s`)\n", args[1], verb, args[0])
				return nil
			},
		}
		if verb == "drain" {
			c.Flags().DurationVar(&deadline, "deadline", 2*time.Minute, "how long its runs have to checkpoint and move")
		}
		return c
	}
	nodes.AddCommand(add, remove,
		drainNode("drain", "Drain a node: no new work; its runs checkpoint now and move to other nodes"),
		drainNode("undrain", "Let a drained node take work again"))

	var (
		label, revoke, s3Creds string
		asEnv                  bool
	)
	joinToken := &cobra.Command{
		Use:   "join-token NAME [--label TEXT] | join-token NAME --revoke ID",
		Short: "Print a fresh join token of the cluster and the command that starts a static node's agent with it, or revoke one (admin)",
		Long: "join-token makes a fresh token each time (kubeadm token create --print-join-command): the token on stdout,\n" +
			"its ID and the join command on stderr. Each token can be revoked on its own (--revoke ID: its agents are\n" +
			"refused from their next heartbeat on); `cluster status` lists them with the nodes using each. --env prints\n" +
			"the agent's whole environment instead (deploy/README.md: several machines).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			base := "/v1/clusters/" + url.PathEscape(args[0])
			if revoke != "" {
				var out struct {
					JoinTokens []cluster.JoinKey `json:"join_tokens"`
				}
				if err := c.JSON(cmd.Context(), http.MethodDelete, base+"/join-tokens/"+url.PathEscape(revoke), nil, &out); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "join token %s of %s revoked; %d others remain besides the cluster's own\n", revoke, args[0], len(out.JoinTokens))
				return nil
			}
			var j joinInfo
			if err := c.JSON(cmd.Context(), http.MethodPost, base+"/join-token?label="+url.QueryEscape(label), nil, &j); err != nil {
				return err
			}
			if asEnv {
				fmt.Fprintf(os.Stderr, "join token %s (revoke: trainyard cluster join-token %s --revoke %s)\n", j.ID, args[0], j.ID)
				return writeAgentEnv(os.Stdout, args[0], &j, s3Creds)
			}
			if cf.output != "table" {
				return cf.print(os.Stdout, j, nil)
			}
			fmt.Println(j.Token)
			fmt.Fprintf(os.Stderr, "join token %s (revoke: trainyard cluster join-token %s --revoke %s)\n", j.ID, args[0], j.ID)
			printJoin(os.Stderr, args[0], &j)
			return nil
		},
	}
	joinToken.Flags().StringVar(&label, "label", "", "what the token is for (a node, a pool), shown in cluster status")
	joinToken.Flags().StringVar(&revoke, "revoke", "", "revoke the token with this ID instead")
	joinToken.Flags().BoolVar(&asEnv, "env", false, "print the agent's whole environment instead (Temporal, S3, the token; deploy/systemd's agent.env, or `set -a; . FILE`), for `trainyard agent --node NAME` on the node")
	joinToken.Flags().StringVar(&s3Creds, "s3-credentials", "", "with --env: add the S3 keys in this JSON file {access_key_id, secret_access_key} (dev writes its agents' to DATA/"+agentCredFile+")")
	cmd.AddCommand(joinToken)
	cmd.AddCommand(up, simple("down", "Drain work and stop every agent", "/down"), simple("restart", "Stop and start every agent", "/restart"), status, queueCmd, nodes)
	return cmd
}

// waitSettled polls status until no node is Pending, printing changes.
func waitSettled(ctx context.Context, c *apiclient.Client, name string) (cluster.Status, error) {
	last := ""
	for {
		var st cluster.Status
		err := c.JSON(ctx, http.MethodGet, "/v1/clusters/"+url.PathEscape(name), nil, &st)
		var p *apiclient.Problem
		if err != nil && !(errors.As(err, &p) && p.Status == http.StatusServiceUnavailable) {
			return st, err
		}
		if err == nil {
			summary := healthSummary(st)
			for _, r := range st.Refused {
				summary += fmt.Sprintf("; refused node %s (agent pid %d): %s", r.Node, r.PID, r.Reason)
			}
			if summary != last {
				fmt.Fprintf(os.Stderr, "cluster %s: %s\n", name, summary)
				last = summary
			}
			if !st.Busy && len(st.Nodes) > 0 {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func healthSummary(st cluster.Status) string {
	var parts []string
	for h, n := range st.Totals.ByHealth {
		parts = append(parts, fmt.Sprintf("%d %s", n, h))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func clusterTable(w *tabwriter.Writer, st cluster.Status) {
	fmt.Fprintf(w, "NODE\tHEALTH\tADDRESS\tPROVIDER\tCPU (used/total)\tMEMORY (used/total)\tGPU (used/total)\tJOBS\tERROR\n")
	for _, n := range st.Nodes {
		gpu := fmt.Sprintf("%d/%d", len(n.Used.GPUs), len(n.Resources.GPUs))
		if len(n.Resources.GPUs) > 0 {
			gpu += " " + n.Resources.GPUs[0].Model
		}
		health, note := string(n.Health), n.Error
		if n.Draining {
			health += ",draining"
			if n.DrainReason != "" {
				note = strings.TrimPrefix(note+"; ", "; ") + "draining: " + n.DrainReason
			}
		}
		if n.GPUsDiffer != "" {
			note = strings.TrimPrefix(note+"; ", "; ") + "GPUs differ: " + n.GPUsDiffer
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.1f/%.1f\t%s/%s\t%s\t%d\t%s\n", n.Name, health, orDash(n.Address), n.Provider,
			n.Used.CPUs, n.Resources.CPUs, humanMB(n.Used.MemoryMB), humanMB(n.Resources.MemoryMB), gpu, len(n.Jobs), note)
	}
	t := st.Totals
	fmt.Fprintf(w, "TOTAL (%d nodes: %s)\t\t\t\t%.1f/%.1f\t%s/%s\t%d/%d\t\t\n", t.Nodes, healthSummary(st),
		t.CPUsUsed, t.CPUs, humanMB(t.MemoryMBUsed), humanMB(t.MemoryMB), t.GPUsUsed, t.GPUs)
	if c := st.Cycle; c != nil {
		fmt.Fprintf(w, "\nSCHEDULING: %d cycles this run, %d asks decided, %d placed; last batch %d, %d asks waiting for the next\n",
			c.Cycles, c.Decided, c.Placed, c.LastBatch, c.Waiting)
	}
	if len(st.Refused) > 0 {
		fmt.Fprintf(w, "\nREFUSED NODE\tAGENT\tHEARTBEATS\tLAST\tWHY\n")
		for _, r := range st.Refused {
			fmt.Fprintf(w, "%s\t%s (pid %d)\t%d\t%s\t%s\n", r.Node, r.AgentID, r.PID, r.Count, r.Last.Local().Format(time.TimeOnly), r.Reason)
		}
	}
	if len(st.JoinKeys) > 0 {
		fmt.Fprintf(w, "\nJOIN TOKEN\tLABEL\tADDED\tNODES\n")
		for _, k := range st.JoinKeys {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", k.ID, orDash(k.Name), k.Added.Local().Format(time.DateTime), orDash(strings.Join(k.Nodes, ",")))
		}
	}
}

// printJoin tells the person bringing a cluster with static nodes up how to
// start their agents (on stderr: stdout stays the status table).
func printJoin(w io.Writer, name string, j *joinInfo) {
	fmt.Fprintf(w, "cluster %s has static nodes: start each one's agent with the cluster's join token (it joins nodes: keep it secret, pass it in the environment or a 0600 secrets file, never as an argument):\n", name)
	for _, c := range j.Commands {
		fmt.Fprintf(w, "  %s\n", c)
	}
	fmt.Fprintf(w, "(trainyard cluster join-token %s prints a fresh one, revocable on its own, and with --env an agent's whole environment; deploy/README.md has the systemd, compose and Kubernetes ways)\n", name)
}

// writeAgentEnv writes the environment a static node's agent needs, one
// VAR=value a line: systemd's EnvironmentFile and a shell's `set -a; .
// FILE` read it alike. The S3 keys come from credFile, if any.
func writeAgentEnv(w io.Writer, name string, j *joinInfo, credFile string) error {
	vars := [][2]string{{"TRAINYARD_CLUSTER", name}, {"TRAINYARD_TEMPORAL_ADDRESS", j.Temporal}, {"TRAINYARD_JOIN_SECRET", j.Token}}
	if j.S3 != "" {
		vars = append(vars, [2]string{"TRAINYARD_S3_ENDPOINT", j.S3}, [2]string{"TRAINYARD_S3_BUCKET", j.S3Bucket})
	}
	if credFile != "" {
		var keys struct {
			ID     string `json:"access_key_id"`
			Secret string `json:"secret_access_key"`
		}
		b, err := os.ReadFile(credFile)
		if err == nil {
			err = json.Unmarshal(b, &keys)
		}
		if err == nil && (keys.ID == "" || keys.Secret == "") {
			err = errors.New("want access_key_id and secret_access_key")
		}
		if err != nil {
			return fmt.Errorf("--s3-credentials %s: %w", credFile, err)
		}
		vars = append(vars, [2]string{"AWS_ACCESS_KEY_ID", keys.ID}, [2]string{"AWS_SECRET_ACCESS_KEY", keys.Secret})
	}
	fmt.Fprintf(w, "# trainyard agent of cluster %s (join token %s): it joins nodes, keep it 0600\n", name, j.ID)
	for _, v := range vars {
		val := v[1]
		if strings.ContainsFunc(val, func(r rune) bool { return !strings.ContainsRune(envSafe, r) }) {
			val = "'" + strings.ReplaceAll(val, "'", `'\''`) + "'"
		}
		fmt.Fprintf(w, "%s=%s\n", v[0], val)
	}
	return nil
}

// envSafe are the characters a value keeps unquoted in writeAgentEnv.
const envSafe = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.:/@+=,"

// joinInfo is the API's join credential (POST /v1/clusters/{name}/join-token).
type joinInfo struct {
	Token    string   `json:"token"`
	ID       string   `json:"id"`
	Temporal string   `json:"temporal"`
	S3       string   `json:"s3,omitempty"`
	S3Bucket string   `json:"s3_bucket,omitempty"`
	Commands []string `json:"commands"`
}

func humanMB(mb int64) string {
	if mb >= 1024 {
		return fmt.Sprintf("%.1fG", float64(mb)/1024)
	}
	return fmt.Sprintf("%dM", mb)
}

type queue struct {
	Cluster string               `json:"cluster"`
	Waiting []cluster.QueueEntry `json:"waiting"`
	Running int                  `json:"running"`
}

func queueTable(w *tabwriter.Writer, q queue) {
	fmt.Fprintln(w, "#\tWAITING\tKIND\tSTATE\tSINCE\tWHY")
	for _, e := range q.Waiting {
		since := "-"
		if e.WaitingSince != nil {
			since = e.WaitingSince.Local().Format(time.TimeOnly)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", e.Position, e.ID, e.Kind, e.State, since, e.Reason)
	}
	if len(q.Waiting) > 0 && len(q.Waiting[0].Running) > 0 {
		fmt.Fprintf(w, "behind\t%s\n", strings.Join(q.Waiting[0].Running, ", "))
	}
}
