package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/apiclient"
	"github.com/trainyard/trainyard/workflows/sweep"
)

func newSweepCmd() *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{Use: "sweep", Short: "Hyper-parameter sweeps: run, ls, show, cancel"}
	addClientFlags(cmd, cf)

	var spec sweep.SweepSpec
	var target float64
	var hyper, grid []string
	var detach bool
	runCmd := &cobra.Command{
		Use:   "run --cluster NAME --env PLUGIN --grid NAME=V1,V2 [--grid ...] [flags] [-- COMMAND {NAME}...]",
		Short: "Start a grid sweep (each trial a training run) and follow its results table (--detach to only submit)",
		Long: "run starts one training run per point of the grid (the cartesian product of the --grid values),\n" +
			"at most --max-concurrent at once. Grid names are PPO hyper-parameters (learning_rate, gamma, hidden, ...),\n" +
			"seed, and the seed-000 knobs (workers, envs_per_worker, episode_length, batch_size). The other flags\n" +
			"set the base run as in `trainyard run train`. After --, each trial runs COMMAND as its own trainer with\n" +
			"{name} replaced by the trial's value; --gpus-per-trial 0.25 lets four such trials share one GPU.",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				spec.Run.Algorithm, spec.Run.Command = "command", args
			} else if spec.Run.Env == "" {
				return fmt.Errorf("sweep run: give --env PLUGIN for the built-in learner, or -- COMMAND for your own trainer")
			}
			var err error
			if spec.Grid, err = parseGrid(grid); err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if spec.Run.Env, err = pluginRef(ctx, c, spec.Run.Env); err != nil {
				return err
			}
			if spec.Run.Reward, err = pluginRef(ctx, c, spec.Run.Reward); err != nil {
				return err
			}
			if cmd.Flags().Changed("target-return") {
				spec.Run.TargetReturn = &target
			}
			if spec.Run.Hyperparameters, err = parseSets(hyper); err != nil {
				return err
			}
			var ref struct {
				ID     string   `json:"id"`
				Trials []string `json:"trials"`
			}
			if err := c.JSON(ctx, http.MethodPost, "/v1/sweeps", spec, &ref); err != nil {
				return err
			}
			if detach || cf.output != "table" {
				fmt.Fprintln(os.Stdout, ref.ID)
				return nil
			}
			fmt.Fprintf(os.Stderr, "sweep %s submitted: %d trials; Ctrl-C stops following (the sweep goes on; `trainyard sweep cancel %s` stops it)\n", ref.ID, len(ref.Trials), ref.ID)
			return followSweep(ctx, c, ref.ID, os.Stdout)
		},
	}
	addRunSpecFlags(runCmd.Flags(), &spec.Run, &target, &hyper)
	f := runCmd.Flags()
	f.Lookup("name").Usage = "a label for the sweep (trials add their params)"
	f.StringArrayVar(&grid, "grid", nil, "NAME=V1,V2,... values to try (repeatable; JSON values, e.g. hidden=[64,64],[128,128])")
	f.IntVar(&spec.MaxConcurrent, "max-concurrent", 0, "trials running at once (default 4)")
	f.Float64Var(&spec.GPUsPerTrial, "gpus-per-trial", 0, "GPUs per command trial; a fraction shares one device")
	f.BoolVar(&detach, "detach", false, "print the sweep id and return at once")
	_ = runCmd.MarkFlagRequired("cluster")
	// --name labels the sweep, not each run.
	runCmd.PreRun = func(*cobra.Command, []string) { spec.Name, spec.Run.Name = spec.Run.Name, "" }

	ls := &cobra.Command{
		Use: "ls", Short: "List sweeps", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var out struct {
				Sweeps []api.SweepSummary `json:"sweeps"`
			}
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/sweeps", nil, &out); err != nil {
				return err
			}
			return cf.print(os.Stdout, out, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tNAME\tCLUSTER\tENV\tSTATUS\tSTARTED")
				for _, s := range out.Sweeps {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Name, s.Cluster, s.Env, s.Status, s.StartTime.Local().Format(time.DateTime))
				}
			})
		},
	}

	show := &cobra.Command{
		Use: "show ID", Short: "A sweep's results table: one row per trial, the best marked", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			s, err := getSweep(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			return cf.print(os.Stdout, s, func(w *tabwriter.Writer) { sweepTable(w, s) })
		},
	}

	cancel := &cobra.Command{
		Use: "cancel ID", Short: "Cancel a sweep: running trials stop (checkpoints stay), pending ones never start", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var s api.Sweep
			if err := c.JSON(cmd.Context(), http.MethodPost, "/v1/sweeps/"+args[0]+"/cancel", nil, &s); err != nil {
				return err
			}
			return cf.print(os.Stdout, s, func(w *tabwriter.Writer) { fmt.Fprintf(w, "sweep %s: cancelling\n", s.ID) })
		},
	}
	cmd.AddCommand(runCmd, ls, show, cancel)
	return cmd
}

// parseGrid reads --grid NAME=V1,V2 flags; each value is JSON when it
// parses (numbers, [64,64], true) and a string otherwise.
func parseGrid(flags []string) (map[string][]any, error) {
	grid := map[string][]any{}
	for _, g := range flags {
		k, v, ok := strings.Cut(g, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("--grid %q: want NAME=V1,V2,...", g)
		}
		var vals []any
		if err := json.Unmarshal([]byte("["+v+"]"), &vals); err != nil {
			vals = nil
			for _, s := range strings.Split(v, ",") {
				vals = append(vals, s)
			}
		}
		grid[k] = append(grid[k], vals...)
	}
	return grid, nil
}

func getSweep(ctx context.Context, c *apiclient.Client, id string) (api.Sweep, error) {
	var s api.Sweep
	err := c.JSON(ctx, http.MethodGet, "/v1/sweeps/"+id, nil, &s)
	return s, err
}

func sweepTable(w *tabwriter.Writer, s api.Sweep) {
	p := s.Progress
	fmt.Fprintf(w, "sweep %s (%s) on %s: %s — %d running, %d pending, %d succeeded, %d short of target, %d failed, %d cancelled\n\n",
		s.ID, firstNonEmpty(s.Name, "-"), s.Cluster, firstNonEmpty(p.State, s.Status), p.Running, p.Pending, p.Succeeded, p.Completed, p.Failed, p.Cancelled)
	fmt.Fprintln(w, "#\tRUN\tPARAMS\tSTATE\tNODE\tITER\tRETURN\tBEST\tNOTE")
	for _, t := range p.Trials {
		mark := ""
		if t.Index == p.Best {
			mark = " *"
		}
		note := firstNonEmpty(t.Error, t.Reason)
		if len(t.GPUs) > 0 {
			note = strings.TrimSpace(fmt.Sprintf("gpus %v %s", t.GPUs, note))
		}
		fmt.Fprintf(w, "%d%s\t%s\t%s\t%s\t%s\t%d\t%.2f\t%.2f\t%s\n", t.Index, mark, t.RunID, t.Params, t.State, firstNonEmpty(t.Node, "-"),
			t.Iteration, t.MeanReturn, t.BestReturn, note)
	}
}

// followSweep redraws the results table until the sweep ends.
func followSweep(ctx context.Context, c *apiclient.Client, id string, out io.Writer) error {
	last := ""
	for {
		s, err := getSweep(ctx, c, id)
		if err != nil {
			return err
		}
		var b strings.Builder
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		sweepTable(tw, s)
		_ = tw.Flush()
		if b.String() != last {
			if isTerminal(out) && last != "" {
				fmt.Fprintf(out, "\033[%dA\033[J", strings.Count(last, "\n"))
			}
			fmt.Fprint(out, b.String())
			last = b.String()
		}
		if s.Status != "running" {
			if s.Error != "" {
				return fmt.Errorf("sweep %s: %s", id, s.Error)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}
