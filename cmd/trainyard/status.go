package main

import (
	"context"
	"errors"
	"fmt"
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

// overview is what `trainyard status` shows: the control plane, every
// cluster with its nodes and queue, and the latest runs.
type overview struct {
	API      string            `json:"api"`
	Ready    bool              `json:"ready"`
	Problems []string          `json:"problems,omitempty"`
	Clusters []clusterOverview `json:"clusters"`
	Runs     []api.RunSummary  `json:"recent_runs"`
	RunCount map[string]int    `json:"runs_by_status"`
}

type clusterOverview struct {
	Status  cluster.Status `json:"status"`
	Waiting []waitingWork  `json:"waiting"`
}

// waitingWork is the part of GET /v1/clusters/{name}/queue shown here.
type waitingWork struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	State  string `json:"state"`
	Reason string `json:"reason"`
}

func newStatusCmd() *cobra.Command {
	var cf clientFlags
	var recent int
	cmd := &cobra.Command{
		Use:   "status",
		Short: "One screen: control plane, clusters (nodes, GPUs, queue) and recent runs",
		Long: "status is the overview `ray status` gives plus the queue and the latest runs: whether the control\n" +
			"plane is ready (and what is not), each cluster's nodes with CPUs, memory and GPUs used/total, the work\n" +
			"waiting for a node and why, and the most recent training runs.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			o, err := gatherOverview(cmd.Context(), c, recent)
			if err != nil {
				return err
			}
			return cf.print(os.Stdout, o, func(w *tabwriter.Writer) { overviewTable(w, o) })
		},
	}
	addClientFlags(cmd, &cf)
	cmd.Flags().IntVar(&recent, "runs", 8, "how many recent runs to list")
	return cmd
}

func gatherOverview(ctx context.Context, c *apiclient.Client, recent int) (overview, error) {
	o := overview{API: c.BaseURL, Clusters: []clusterOverview{}, RunCount: map[string]int{}}
	// /readyz answers 503 with what failed; that is information, not an error.
	var ready struct {
		Status string `json:"status"`
	}
	err := c.JSON(ctx, http.MethodGet, "/readyz", nil, &ready)
	var p *apiclient.Problem
	switch {
	case err == nil:
		o.Ready = true
	case errors.As(err, &p):
		o.Problems = append(o.Problems, p.Error())
	default:
		return o, err // the client's error names the URL and how to set it
	}
	var list struct {
		Clusters []string `json:"clusters"`
	}
	if err := c.JSON(ctx, http.MethodGet, "/v1/clusters", nil, &list); err != nil {
		return o, err
	}
	sort.Strings(list.Clusters)
	for _, name := range list.Clusters {
		var co clusterOverview
		if err := c.JSON(ctx, http.MethodGet, "/v1/clusters/"+url.PathEscape(name), nil, &co.Status); err != nil {
			o.Problems = append(o.Problems, fmt.Sprintf("cluster %s: %v", name, err))
			continue
		}
		var q struct {
			Waiting []waitingWork `json:"waiting"`
		}
		if err := c.JSON(ctx, http.MethodGet, "/v1/clusters/"+url.PathEscape(name)+"/queue", nil, &q); err == nil {
			co.Waiting = q.Waiting
		}
		o.Clusters = append(o.Clusters, co)
	}
	var runs struct {
		Runs []api.RunSummary `json:"runs"`
	}
	if err := c.JSON(ctx, http.MethodGet, "/v1/runs", nil, &runs); err != nil {
		return o, err
	}
	for _, r := range runs.Runs {
		o.RunCount[r.Status]++
	}
	sort.Slice(runs.Runs, func(i, j int) bool { return runs.Runs[i].StartTime.After(runs.Runs[j].StartTime) })
	o.Runs = runs.Runs[:min(recent, len(runs.Runs))]
	return o, nil
}

func overviewTable(w *tabwriter.Writer, o overview) {
	state := "ready"
	if !o.Ready {
		state = "NOT READY"
	}
	fmt.Fprintf(w, "Control plane %s: %s\n", o.API, state)
	for _, p := range o.Problems {
		fmt.Fprintf(w, "  ! %s\n", p)
	}
	if len(o.Clusters) == 0 {
		fmt.Fprintln(w, "\nNo clusters (trainyard cluster up -f CLUSTER.yaml).")
	}
	for _, co := range o.Clusters {
		fmt.Fprintf(w, "\nCluster %s (%s)\n", co.Status.Cluster, co.Status.Desired)
		clusterTable(w, co.Status)
		if len(co.Waiting) == 0 {
			fmt.Fprintln(w, "Queue: empty")
			continue
		}
		fmt.Fprintf(w, "Queue: %d waiting\n", len(co.Waiting))
		for i, e := range co.Waiting {
			if i == 5 {
				fmt.Fprintf(w, "  … %d more (trainyard cluster queue %s)\n", len(co.Waiting)-5, co.Status.Cluster)
				break
			}
			fmt.Fprintf(w, "  %d. %s %s (%s): %s\n", i+1, e.Kind, e.ID, e.State, e.Reason)
		}
	}
	var counts []string
	for s, n := range o.RunCount {
		counts = append(counts, fmt.Sprintf("%d %s", n, s))
	}
	sort.Strings(counts)
	if len(o.Runs) == 0 {
		fmt.Fprintln(w, "\nRuns: none yet (trainyard run train --cluster NAME --env PLUGIN)")
		return
	}
	fmt.Fprintf(w, "\nRuns: %s; the latest:\n", strings.Join(counts, ", "))
	fmt.Fprintln(w, "ID\tCLUSTER\tENV\tSTATUS\tSTARTED")
	for _, r := range o.Runs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Cluster, r.Env, r.Status, r.StartTime.Local().Format(time.DateTime))
	}
}
