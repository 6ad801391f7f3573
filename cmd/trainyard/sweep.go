package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
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

	var pols policyFlags
	var spec sweep.SweepSpec
	var sched sweep.Scheduler
	var target float64
	var hyper, grid, params []string
	var detach bool
	runCmd := &cobra.Command{
		Use:   "run --cluster NAME --env PLUGIN (--grid NAME=V1,V2 | --param NAME=KIND:ARGS --samples N)... [--scheduler asha|median] [flags] [-- COMMAND {NAME}...]",
		Short: "Start a sweep (grid or random search; each trial a training run) and follow its results table (--detach to only submit)",
		Long: "run starts one training run per point of the grid (the cartesian product of the --grid values),\n" +
			"at most --max-concurrent at once. Names are PPO hyper-parameters (learning_rate, gamma, hidden, ...),\n" +
			"seed, and the seed-000 knobs (workers, envs_per_worker, episode_length, batch_size). The other flags\n" +
			"set the base run as in `trainyard run train`. After --, each trial runs COMMAND as its own trainer with\n" +
			"{name} replaced by the trial's value; --gpus-per-trial 0.25 lets four such trials share one GPU.\n\n" +
			"Random search (--search random, implied by --param) draws --samples trials, each value from its\n" +
			"--param distribution: uniform:MIN:MAX, loguniform:MIN:MAX, randint:MIN:MAX (MAX excluded) or\n" +
			"choice:V1,V2,... (JSON values); --search-seed makes the draw repeatable.\n\n" +
			"--scheduler asha stops weak trials at rungs (--grace-period × --reduction-factor^k iterations, below\n" +
			"--max-t): only the top 1/reduction-factor at a rung go on. --scheduler median stops a trial whose best\n" +
			"is below the median of the others' running means (after --grace-period, with --min-samples others).\n" +
			"Trials report after every segment: --checkpoint-every decides how soon a weak trial is caught.",
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
			if spec.ParamSpace, err = parseParams(params); err != nil {
				return err
			}
			if spec.Search == "" && len(params) > 0 {
				spec.Search = sweep.SearchRandom
			}
			for _, name := range []string{"scheduler", "metric", "mode", "grace-period", "reduction-factor", "max-t", "min-samples"} {
				if cmd.Flags().Changed(name) {
					spec.Scheduler = &sched // without --scheduler, the server names scheduler.type
				}
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
			if err := pols.apply(&spec.Run); err != nil {
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
	pols.add(f)
	f.Lookup("name").Usage = "a label for the sweep (trials add their params)"
	f.StringArrayVar(&grid, "grid", nil, "NAME=V1,V2,... values to try (repeatable; JSON values, e.g. hidden=[64,64],[128,128])")
	f.StringVar(&spec.Search, "search", "", "grid or random (default: random with --param, else grid)")
	f.StringArrayVar(&params, "param", nil, "random search: NAME=uniform:MIN:MAX, loguniform:MIN:MAX, randint:MIN:MAX or choice:V1,V2,... (repeatable)")
	f.IntVar(&spec.NumSamples, "samples", 0, "random search: trials to draw (times the --grid points, if any)")
	f.Uint64Var(&spec.SearchSeed, "search-seed", 0, "random search: the sampler's seed (default: picked by the server, shown by sweep show -o json)")
	f.StringVar(&sched.Type, "scheduler", "", "stop weak trials early: asha or median (default: none, every trial runs its budget)")
	f.StringVar(&sched.Metric, "metric", "", "what the scheduler judges and the table ranks by: mean_return (default), episode_return_mean, episode_length_mean, or one policy's policy/NAME/recent_return_mean")
	f.StringVar(&sched.Mode, "mode", "", "max (default) or min: which way the metric is better")
	f.Int64Var(&sched.GracePeriod, "grace-period", 0, "iterations before a trial can be stopped; asha's first rung (default 10)")
	f.Float64Var(&sched.ReductionFactor, "reduction-factor", 0, "asha: rung spacing; 1/this of the trials at a rung go on (default 3)")
	f.Int64Var(&sched.MaxT, "max-t", 0, "asha: iterations a trial trains at most (default --iterations)")
	f.IntVar(&sched.MinSamples, "min-samples", 0, "median: other trials needed at an iteration before judging there (default 3)")
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
		Use: "show ID", Short: "A sweep's results table: one row per trial, best first (stopped ones with where they stopped), the best finished trial marked *", Args: cobra.ExactArgs(1),
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

// parseParams reads --param NAME=KIND:ARGS flags: uniform:MIN:MAX,
// loguniform:MIN:MAX, randint:MIN:MAX or choice:V1,V2,... (values as in
// --grid). The server checks the bounds.
func parseParams(flags []string) (map[string]sweep.Distribution, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	space := map[string]sweep.Distribution{}
	for _, f := range flags {
		k, v, _ := strings.Cut(f, "=")
		kind, args, _ := strings.Cut(v, ":")
		if k == "" || args == "" {
			return nil, fmt.Errorf("--param %q: want NAME=KIND:ARGS, e.g. learning_rate=loguniform:1e-5:3e-3 or seed=choice:1,2,3", f)
		}
		d := sweep.Distribution{Kind: kind}
		if kind == sweep.DistChoice {
			g, err := parseGrid([]string{k + "=" + args})
			if err != nil {
				return nil, err
			}
			d.Values = g[k]
		} else {
			lo, hi, ok := strings.Cut(args, ":")
			var err1, err2 error
			d.Min, err1 = strconv.ParseFloat(lo, 64)
			d.Max, err2 = strconv.ParseFloat(hi, 64)
			if !ok || err1 != nil || err2 != nil {
				return nil, fmt.Errorf("--param %q: want %s=%s:MIN:MAX with numbers", f, k, kind)
			}
		}
		space[k] = d
	}
	return space, nil
}

func sweepTable(w *tabwriter.Writer, s api.Sweep) {
	p := s.Progress
	fmt.Fprintf(w, "sweep %s (%s) on %s: %s — %d running, %d pending, %d succeeded, %d short of target, %d stopped, %d failed, %d cancelled\n\n",
		s.ID, firstNonEmpty(s.Name, "-"), s.Cluster, firstNonEmpty(p.State, s.Status), p.Running, p.Pending, p.Succeeded, p.Completed, p.Stopped, p.Failed, p.Cancelled)
	metric := p.Metric != "" && p.Metric != sweep.DefaultMetric
	header := "RANK\t#\tRUN\tPARAMS\tSTATE\tNODE\tITER\tRETURN\tBEST\t"
	if metric {
		header += strings.ToUpper(p.Metric) + "\t"
	}
	fmt.Fprintln(w, header+"NOTE")
	// Best first (the ranking); a table from before rankings is in trial order.
	order := p.Ranking
	if len(order) != len(p.Trials) {
		order = make([]int, len(p.Trials))
		for i := range order {
			order[i] = i + 1
		}
	}
	for rank, i := range order {
		t := p.Trials[i-1]
		mark := ""
		if t.Index == p.Best {
			mark = " *"
		}
		note := firstNonEmpty(t.Error, t.Reason)
		if len(t.GPUs) > 0 {
			note = strings.TrimSpace(fmt.Sprintf("gpus %v %s", t.GPUs, note))
		}
		if metric {
			note = fmt.Sprintf("%.4g\t%s", t.Metric, note)
		}
		fmt.Fprintf(w, "%d\t%d%s\t%s\t%s\t%s\t%s\t%d\t%.2f\t%.2f\t%s\n", rank+1, t.Index, mark, t.RunID, t.Params, t.State, firstNonEmpty(t.Node, "-"),
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
