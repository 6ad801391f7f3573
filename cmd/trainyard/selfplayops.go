package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/selfplay/alerts"
	"github.com/trainyard/trainyard/internal/selfplay/populate"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/selfplay"
)

// newPopulateCmd: `trainyard selfplay populate start|show|stop`.
func newPopulateCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "populate", Short: "A cluster's queue populator: keeps each config's work at 60% self-play / 30% training / 10% tournament until its Elo target is met"}
	d := daemonCLI[api.SelfplayPopulator]{cf, "/v1/selfplay-populators", populatorTable}
	var req api.SelfplayPopulatorStart
	var configs []string
	var sync time.Duration
	start := &cobra.Command{
		Use:   "start --cluster NAME --config CONFIG[:WEIGHT[:QUOTA[:TARGET_ELO]]]... [flags]",
		Short: "Start the populator: one populator-driven loop per config, queues topped up every --poll",
		Long:  "QUOTA is unused by the populator (it is the scheduler's); WEIGHT sets the priority, TARGET_ELO when a config is done.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, c := range configs {
				sc, err := parseScheduleConfig(c)
				if err != nil {
					return err
				}
				req.Configs = append(req.Configs, sc)
			}
			req.Settings.SyncInterval = sync
			return d.start(cmd, req)
		},
	}
	f := start.Flags()
	t := &req.Tuning
	f.StringVar(&req.Cluster, "cluster", "", "cluster (required)")
	f.StringArrayVar(&configs, "config", nil, "CONFIG[:WEIGHT[:QUOTA[:TARGET_ELO]]] (repeatable)")
	f.DurationVar(&req.Poll, "poll", 0, "how often it looks at the loops (default 30s)")
	f.IntVar(&t.Depth, "depth", 0, "work items kept queued per config (default 3)")
	f.IntVar(&t.MaxQueued, "max-queued", 0, "work items queued across the cluster at most (default 20)")
	f.Float64Var(&t.Mix.Selfplay, "mix-selfplay", 0, "target share of self-play (default 0.6; give all three)")
	f.Float64Var(&t.Mix.Training, "mix-training", 0, "target share of training (default 0.3)")
	f.Float64Var(&t.Mix.Tournament, "mix-tournament", 0, "target share of tournaments (default 0.1)")
	f.DurationVar(&t.StarvationAfter, "starvation-after", 0, "boost configs without work for this long (default 4h)")
	f.IntVar(&req.Alerts.QueueDepthAbove, "alert-queue-depth", 0, "queue depth alert threshold (default 20)")
	f.DurationVar(&req.Alerts.EloVelocityFor, "alert-velocity-for", 0, "how long Elo velocity must stay low to alert (default 72h)")
	f.IntVar(&req.Settings.GamesPerGeneration, "games", 0, "self-play games per batch (default 1000)")
	searchFlags(f, &req.Settings)
	f.IntVar(&req.Settings.EvalGames, "eval-games", 0, "gauntlet games per opponent (default 40)")
	f.IntVar(&req.Settings.Quality.MinGames, "min-games", 0, "minimum games the quality gate needs (default 1000)")
	f.IntVar(&req.Settings.TrainEpochs, "train-epochs", 0, "passes over the training window (default 10)")
	f.DurationVar(&sync, "sync-interval", 0, "how often a node uploads finished games (default 5s)")
	_ = start.MarkFlagRequired("cluster")
	_ = start.MarkFlagRequired("config")
	cmd.AddCommand(start)
	cmd.AddCommand(d.showStop("Configs with priority and why, target and actual mix, work done and queued; decisions; alerts",
		"Stop the populator; its loops stop after the work item in flight")...)
	return cmd
}

func counts(c populate.Counts) string {
	return fmt.Sprintf("%d/%d/%d", c[populate.Selfplay], c[populate.Training], c[populate.Tournament])
}

func mix(m populate.Mix) string {
	return fmt.Sprintf("%.0f/%.0f/%.0f%%", 100*m.Selfplay, 100*m.Training, 100*m.Tournament)
}

func populatorTable(w *tabwriter.Writer, p api.SelfplayPopulator) {
	st := p.State
	fmt.Fprintf(w, "cluster\t%s\nstatus\t%s\nphase\t%s\npolls\t%d\ntarget mix\t%s (self-play/training/tournament)\n", p.Cluster, p.Status, st.Phase, st.Polls, mix(p.Tuning.Mix))
	if st.LastError != "" {
		fmt.Fprintf(w, "last error\t%s\n", st.LastError)
	}
	if p.Error != "" {
		fmt.Fprintf(w, "error\t%s\n", p.Error)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "CONFIG\tSTATE\tPRIORITY\tDONE S/T/G\tQUEUED S/T/G\tACTUAL\tWHY")
	for _, c := range st.Plans {
		fmt.Fprintf(w, "%s\t%s\t%.2f\t%s\t%s\t%s\t%s\n", c.Config, c.State, c.Priority, counts(c.Done), counts(c.Queued), mix(c.Actual), c.Why)
	}
	if len(st.Events) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "AT\tCONFIG\tWHAT")
		for _, e := range st.Events[max(0, len(st.Events)-15):] {
			fmt.Fprintf(w, "%s\t%s\t%s\n", e.At.Local().Format(time.DateTime), orDash(e.Config), e.What)
		}
	}
	if len(st.Alerts) > 0 {
		fmt.Fprintln(w)
		alertsTable(w, st.Alerts)
	}
}

// addSelfplayOpsCmds: configs, datasets, queue, daemons, utilization,
// alerts.
func addSelfplayOpsCmds(cmd *cobra.Command, cf *clientFlags) {
	getter := func(use, short string, args cobra.PositionalArgs, path func([]string) string, out any, table func(*tabwriter.Writer)) *cobra.Command {
		return &cobra.Command{
			Use: use, Short: short, Args: args,
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				if err := c.JSON(cmd.Context(), http.MethodGet, path(a), nil, out); err != nil {
					return err
				}
				return cf.print(os.Stdout, out, table)
			},
		}
	}
	var configs struct {
		Configs []selfplay.ConfigEntry `json:"configs"`
	}
	cfgCmd := getter("configs", "The configs catalogue: board cells, min VRAM and tier, curriculum weight, games, Elo and Elo velocity", cobra.NoArgs,
		func([]string) string { return "/v1/selfplay/configs" }, &configs, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "CONFIG\tCELLS\tMIN VRAM\tTIER\tWEIGHT\tGAMES\tBEST\tELO\tVELOCITY")
			for _, c := range configs.Configs {
				fmt.Fprintf(w, "%s\t%d\t%d GB\t%s\t%.2f\t%d\t%s\t%.0f\t%s\n", c.Config, c.Cells, c.MinGB, c.Tier, c.Weight, c.Games, orDash(c.Best), c.Elo, velocityText(c.Velocity, c.VelocityNote))
			}
		})

	var dsCluster, dsConfig string
	var ds struct {
		Loops []selfplay.LoopData `json:"loops"`
	}
	dsCmd := getter("datasets", "NPZ exports and game batches in S3 per loop: counts, sizes, quality scores", cobra.NoArgs,
		func([]string) string {
			q := url.Values{}
			if dsCluster != "" {
				q.Set("cluster", dsCluster)
			}
			if dsConfig != "" {
				q.Set("config", dsConfig)
			}
			return "/v1/selfplay/datasets?" + q.Encode()
		}, &ds, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "LOOP\tGEN\tSTATE\tGAMES\tBATCHES\tBATCH BYTES\tQUALITY\tPOSITIONS\tNPZ BYTES")
			for _, l := range ds.Loops {
				for _, g := range l.Generations {
					fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\t%d\t%.2f\t%d\t%d\n", l.ID, g.Generation, orDash(g.State), g.Games, g.Batches, g.BatchBytes, g.Quality, g.Positions, g.DatasetBytes)
				}
				fmt.Fprintf(w, "%s\tTOTAL\t\t%d\t%d\t%d\t\t%d npz\t%d\n", l.ID, l.Games, l.Batches, l.BatchBytes, l.Datasets, l.DataBytes)
			}
		})
	dsCmd.Flags().StringVar(&dsCluster, "cluster", "", "only this cluster")
	dsCmd.Flags().StringVar(&dsConfig, "config", "", "only this config")

	var q selfplay.QueueStatus
	queueCmd := getter("queue", "Work queued and running by kind and config across clusters, actual vs target mix", cobra.NoArgs,
		func([]string) string { return "/v1/queue/status" }, &q, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "CLUSTER\tCONFIG\tPOPULATED\tRUNNING\tQUEUED S/T/G\tDONE S/T/G\tACTUAL\tTARGET")
			for _, c := range q.Clusters {
				for _, x := range c.Configs {
					fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%s\t%s\t%s\t%s\n", c.Cluster, x.Config, x.Populated, orDash(x.Running), counts(x.Queued), counts(x.Done), mix(x.Actual), mix(c.Target))
				}
				fmt.Fprintf(w, "%s\tTOTAL (depth %d)\t\t%s\t%s\t%s\t%s\t%s\n", c.Cluster, c.Depth, counts(c.Running), counts(c.Queued), counts(c.Done), mix(c.Actual), mix(c.Target))
			}
		})

	var d struct {
		Daemons []api.Daemon `json:"daemons"`
	}
	daemonsCmd := getter("daemons", "Each daemon (scheduler, idle, populator, ephemeral sync): running or not, last activity, last error", cobra.NoArgs,
		func([]string) string { return "/v1/daemons/health" }, &d, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "KIND\tID\tSTATUS\tLAST ACTIVITY\tLAST ERROR\tDETAIL")
			for _, x := range d.Daemons {
				at := "-"
				if x.LastActivity != nil {
					at = x.LastActivity.Local().Format(time.DateTime)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", x.Kind, x.ID, x.Status, at, orDash(x.LastError), x.Detail)
			}
		})

	var u cluster.Utilization
	utilCmd := getter("utilization CLUSTER", "Per node CPU/GPU allocation and reported GPU utilisation", cobra.ExactArgs(1),
		func(a []string) string { return "/v1/clusters/" + url.PathEscape(a[0]) + "/utilization" }, &u, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "NODE\tHEALTH\tCPU\tCPU %\tGPUS ALLOCATED\tGPU %\tGPU UTIL\tJOBS")
			util := func(p *float64) string {
				if p == nil {
					return "-"
				}
				return fmt.Sprintf("%.0f%%", *p)
			}
			for _, n := range u.Nodes {
				alloc := 0
				for _, g := range n.GPUs {
					if g.Allocated {
						alloc++
					}
				}
				fmt.Fprintf(w, "%s\t%s\t%.1f/%.1f\t%.0f%%\t%d/%d\t%.0f%%\t%s\t%d\n", n.Name, n.Health, n.CPUsUsed, n.CPUs, n.CPUPct, alloc, len(n.GPUs), n.GPUPct, util(n.GPUUtil), len(n.Jobs))
			}
			fmt.Fprintf(w, "TOTAL\t\t\t%.0f%%\t\t%.0f%%\t%s\t\n", u.CPUPct, u.GPUPct, util(u.GPUUtil))
		})

	var all bool
	var al struct {
		Alerts []api.ClusterAlert `json:"alerts"`
	}
	alertsCmd := getter("alerts", "The seed's alert table as the populators evaluate it (--all: pending conditions too)", cobra.NoArgs,
		func([]string) string {
			if all {
				return "/v1/alerts?all=true"
			}
			return "/v1/alerts"
		}, &al, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "CLUSTER\tRULE\tSUBJECT\tSTATE\tVALUE\tSINCE\tCONDITION")
			for _, a := range al.Alerts {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.2f\t%s\t%s\n", a.Cluster, a.Rule, a.Subject, a.State, a.Value, a.Since.Local().Format(time.DateTime), a.Condition)
			}
		})
	alertsCmd.Flags().BoolVar(&all, "all", false, "include pending conditions")
	cmd.AddCommand(cfgCmd, dsCmd, queueCmd, daemonsCmd, utilCmd, alertsCmd)
}

func alertsTable(w *tabwriter.Writer, as []alerts.Alert) {
	fmt.Fprintln(w, "RULE\tSUBJECT\tSTATE\tVALUE\tSINCE\tCONDITION")
	for _, a := range as {
		fmt.Fprintf(w, "%s\t%s\t%s\t%.2f\t%s\t%s\n", a.Rule, a.Subject, a.State, a.Value, a.Since.Local().Format(time.DateTime), a.Condition)
	}
}
