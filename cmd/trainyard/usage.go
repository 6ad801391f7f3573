package main

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/workflows/cluster"
)

func newUsageCmd() *cobra.Command {
	cf := &clientFlags{}
	var clusterName string
	cmd := &cobra.Command{
		Use:   "usage --cluster NAME",
		Short: "The usage ledger over the quota window: GPU-seconds by config, kind, tier and provider, quotas, running work and the queue",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var u cluster.UsageReport
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/usage?cluster="+url.QueryEscape(clusterName), nil, &u); err != nil {
				return err
			}
			return cf.print(os.Stdout, u, func(w *tabwriter.Writer) { usageTable(w, u) })
		},
	}
	addClientFlags(cmd, cf)
	cmd.Flags().StringVar(&clusterName, "cluster", "", "cluster whose ledger to show")
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}

func usageTable(w *tabwriter.Writer, u cluster.UsageReport) {
	fmt.Fprintf(w, "cluster\t%s\nwindow\t%gh ending %s\n", u.Cluster, u.WindowHours, u.At.UTC().Format("2006-01-02 15:04:05Z"))
	for _, by := range []struct {
		name string
		m    map[string]float64
	}{{"config", u.GPUSecondsByConfig}, {"kind", u.GPUSecondsByKind}, {"tier", u.GPUSecondsByTier}, {"provider", u.GPUSecondsByProvider}} {
		for _, k := range slices.Sorted(maps.Keys(by.m)) {
			fmt.Fprintf(w, "gpu-seconds by %s\t%s\t%.0f\n", by.name, orDash(k), by.m[k])
		}
	}
	fmt.Fprintln(w, "CONFIG\tTIER-1 SHARE\tQUOTA\tRUNNING TRAININGS")
	for _, q := range u.Quotas {
		quota := "-"
		if q.Quota > 0 {
			quota = fmt.Sprintf("%.1f%%", 100*q.Quota)
		}
		fmt.Fprintf(w, "%s\t%.2f%%\t%s\t%d\n", orDash(q.Config), 100*q.Tier1Share, quota, q.RunningTrainings)
	}
	fmt.Fprintln(w, "RUNNING\tKIND\tCONFIG\tNODES\tGPUS\tSECONDS")
	for _, r := range u.Running {
		fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%g\t%d\n", r.WorkID, r.Kind, orDash(r.Config), r.Nodes, r.GPUs, r.Seconds)
	}
	fmt.Fprintln(w, "WAITING\tKIND\tCONFIG\tPRIORITY\tWAITED\tREASON")
	for _, q := range u.Queue {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d (base %d)\t%ds\t%s\n", q.WorkID, q.Kind, orDash(q.Config), q.EffectivePriority, q.Priority, q.WaitingSeconds, q.Reason)
	}
}
