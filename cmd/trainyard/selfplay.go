package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/worker"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/agent/procenv"
	"github.com/trainyard/trainyard/internal/apiclient"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/workflows"
	"github.com/trainyard/trainyard/workflows/selfplay"
)

// registerSelfplayAgent gives the agent's worker the self-play activities,
// sharing the training runner's plugin runtime and plugin store.
func registerSelfplayAgent(ctx context.Context, w worker.Registry, o *agentOptions, dir string, runner *training.Runner, jobUser *procenv.User) error {
	store, err := objstore.Open(ctx, o.s3)
	if err != nil {
		return err
	}
	workflows.RegisterSelfplayAgent(w, &selfplay.AgentActivities{Plugins: runner.Plugins, PluginStore: runner.Store, Store: store, Dir: dir, Node: o.node, Drain: runner.Drain, User: jobUser})
	return nil
}

func newSelfplayCmd() *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{Use: "selfplay", Short: "Self-play loops and their daemons: start, ls, show, stop, leaderboard, schedule, idle, populate, configs, datasets, queue, daemons, utilization, alerts"}
	addClientFlags(cmd, cf)

	var req api.SelfplayStart
	var sync time.Duration
	var evalCmd, trainCmd, evalRes, trainRes string
	var maxBatch int
	start := &cobra.Command{
		Use:   "start --cluster NAME --config CONFIG [flags]",
		Short: "Start a self-play loop for a game config (square8_2p, hex8_3p, ...) on a cluster",
		Long: "start runs generations of self-play → quality gate → NPZ export → training → gauntlet → Elo update\n" +
			"and promotion until stopped (or --generations). The game plugin defaults to kinrow-CONFIG, which must\n" +
			"be uploaded (`trainyard plugin upload`). --evaluator and --trainer make the model yours (a PyTorch\n" +
			"network, say: sdk/python/examples/kinrow_az.py). See docs/selfplay.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			req.Settings.SyncInterval = sync
			if evalCmd != "" || trainCmd != "" {
				m := &selfplay.ModelCommands{Evaluator: strings.Fields(evalCmd), Trainer: strings.Fields(trainCmd), MaxBatch: maxBatch}
				if m.EvaluatorResources, err = parseResources("--evaluator-resources", evalRes); err != nil {
					return err
				}
				if m.TrainerResources, err = parseResources("--trainer-resources", trainRes); err != nil {
					return err
				}
				req.Settings.Model = m
			} else if evalRes != "" || trainRes != "" {
				return fmt.Errorf("--evaluator-resources and --trainer-resources need --evaluator and --trainer")
			}
			var sp api.Selfplay
			if err := c.JSON(cmd.Context(), http.MethodPost, "/v1/selfplay", req, &sp); err != nil {
				return err
			}
			return cf.print(os.Stdout, sp, func(w *tabwriter.Writer) { selfplayTable(w, sp) })
		},
	}
	f := start.Flags()
	s := &req.Settings
	f.StringVar(&req.Cluster, "cluster", "", "cluster to run on (required)")
	f.StringVar(&req.Config, "config", "", "game config, e.g. square8_2p (required)")
	f.StringVar(&req.Game, "game", "", "game plugin (sha256, name@version or name; default kinrow-CONFIG)")
	f.IntVar(&s.Generations, "generations", 0, "stop after this many generations (0: until stopped)")
	f.IntVar(&s.GamesPerGeneration, "games", 0, "self-play games per generation (default 1000)")
	f.IntVar(&s.BootstrapGames, "bootstrap-games", 0, "games in the generations played before a model exists (default: --games); the bootstrap's games are cheap")
	searchFlags(f, s)
	f.IntVar(&s.EvalGames, "eval-games", 0, "gauntlet games per opponent (default 40)")
	f.IntVar(&s.MaxMoves, "max-moves", 0, "move cap per game (default: the board's cells)")
	f.DurationVar(&sync, "sync-interval", 0, "how often a node uploads finished games (default 5s)")
	f.IntVar(&s.Parallel, "parallel", 0, "games a node plays at once (default: --cpus)")
	f.Float64Var(&s.CPUs, "cpus", 0, "CPUs per generation (default 1)")
	f.IntVar(&s.GPUs, "gpus", 0, "GPUs per generation")
	f.Int64Var(&s.MemoryMB, "memory-mb", 0, "memory per generation (default 512)")
	f.IntVar(&s.TrainWindow, "train-window", 0, "train on this many recent generations' exports (default 3)")
	f.IntVar(&s.TrainEpochs, "train-epochs", 0, "passes over the training window (default 10)")
	f.Float64Var(&s.PromoteScore, "promote-score", 0, "score against the best needed for promotion (default 0.55)")
	f.IntVar(&s.ContinueEvery, "continue-every", 0, "generations per workflow run before continue-as-new (default 5)")
	f.Uint64Var(&s.Seed, "seed", 0, "seed")
	f.Float64Var(&s.Quality.Threshold, "quality-threshold", 0, "minimum quality score (default 0.7)")
	f.IntVar(&s.Quality.MinGames, "min-games", 0, "minimum games the quality gate needs (default 1000)")
	f.IntVar(&s.Quality.MinMoves, "min-moves", 0, "shorter games are rejected (default 1)")
	f.Float64Var(&s.Quality.MinDecisive, "min-decisive", 0, "decisive-game ratio for the full score (default 0.3)")
	f.StringVar(&evalCmd, "evaluator", "", "your model: the command serving a model directory to the search, split on spaces (with --trainer; docs/selfplay.md)")
	f.StringVar(&trainCmd, "trainer", "", "your model: the command training the next candidate, split on spaces (with --evaluator)")
	f.IntVar(&maxBatch, "max-batch", 0, "your model: most positions in one evaluator batch (default 256)")
	f.StringVar(&evalRes, "evaluator-resources", "", "your model: what one evaluator needs, e.g. gpus=1,cpus=2,memory_mb=8192; with this or --trainer-resources each phase is placed on its own, by the policy's tiers")
	f.StringVar(&trainRes, "trainer-resources", "", "your model: what the trainer needs, e.g. gpus=1,cpus=8 (a training allocation: Tier 1 first)")
	_ = start.MarkFlagRequired("cluster")
	_ = start.MarkFlagRequired("config")

	ls := &cobra.Command{
		Use: "ls", Short: "List self-play loops", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var out struct {
				Loops []api.SelfplaySummary `json:"loops"`
			}
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/selfplay", nil, &out); err != nil {
				return err
			}
			return cf.print(os.Stdout, out, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "LOOP\tSTATUS\tPHASE\tGENERATION\tBEST\tELO\tSTARTED")
				for _, l := range out.Loops {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%.0f\t%s\n", l.ID, l.Status, l.Phase, l.Generation, l.Best, l.BestElo, l.StartTime.Local().Format(time.DateTime))
				}
			})
		},
	}

	var follow bool
	show := &cobra.Command{
		Use: "show CLUSTER/CONFIG", Short: "A loop's phase, generations (games, quality, gauntlet, Elo) and best model", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			p, err := loopPath(args[0])
			if err != nil {
				return err
			}
			if follow {
				return followSelfplay(cmd.Context(), c, p, os.Stdout)
			}
			var sp api.Selfplay
			if err := c.JSON(cmd.Context(), http.MethodGet, p, nil, &sp); err != nil {
				return err
			}
			return cf.print(os.Stdout, sp, func(w *tabwriter.Writer) { selfplayTable(w, sp) })
		},
	}
	show.Flags().BoolVarP(&follow, "follow", "f", false, "follow the loop: a live progress line per generation until it stops")

	var now bool
	stop := &cobra.Command{
		Use: "stop CLUSTER/CONFIG", Short: "Stop a loop after its current generation (--now: at once)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			p, err := loopPath(args[0])
			if err != nil {
				return err
			}
			if now {
				p += "/stop?now=true"
			} else {
				p += "/stop"
			}
			var sp api.Selfplay
			if err := c.JSON(cmd.Context(), http.MethodPost, p, nil, &sp); err != nil {
				return err
			}
			return cf.print(os.Stdout, sp, func(w *tabwriter.Writer) { selfplayTable(w, sp) })
		},
	}
	stop.Flags().BoolVar(&now, "now", false, "cancel at once instead of after the generation in flight")

	var config string
	var history bool
	board := &cobra.Command{
		Use: "leaderboard [--config CONFIG]", Short: "Elo leaderboard per config, with Elo velocity (--history: the matches)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if config != "" {
				q.Set("config", config)
			}
			if history {
				q.Set("history", "true")
			}
			var out struct {
				Leaderboards []api.Leaderboard `json:"leaderboards"`
			}
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/selfplay/leaderboard?"+q.Encode(), nil, &out); err != nil {
				return err
			}
			return cf.print(os.Stdout, out, func(w *tabwriter.Writer) { leaderboardTable(w, out.Leaderboards, history) })
		},
	}
	board.Flags().StringVar(&config, "config", "", "only this config")
	board.Flags().BoolVar(&history, "history", false, "also print the match history")

	cmd.AddCommand(start, ls, show, stop, board, newScheduleCmd(cf), newIdleCmd(cf), newPopulateCmd(cf))
	cmd.AddCommand(curveCmds(cf, "CLUSTER/CONFIG", "a loop", loopPath)...)
	addSelfplayOpsCmds(cmd, cf)
	return cmd
}

// newScheduleCmd: `trainyard selfplay schedule start|show|stop`.
func newScheduleCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "schedule", Short: "A cluster's self-play scheduler: slices of generations to the config with the highest priority"}
	d := daemonCLI[api.SelfplaySchedule]{cf, "/v1/selfplay-schedules", scheduleTable}
	var req api.SelfplayScheduleStart
	var configs []string
	var sync time.Duration
	start := &cobra.Command{
		Use:   "start --cluster NAME --config CONFIG[:WEIGHT[:QUOTA[:TARGET_ELO]]]... [flags]",
		Short: "Start the scheduler: priority by curriculum weight × Elo velocity, starvation boost after 4h, quality gating, quotas",
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
	f.StringVar(&req.Cluster, "cluster", "", "cluster to run on (required)")
	f.StringArrayVar(&configs, "config", nil, "a config, optionally with curriculum weight, quota share and Elo target: hex8_2p:2:0.25:1600 (repeatable)")
	f.IntVar(&req.Slots, "slots", 0, "loops at once (default 1)")
	f.IntVar(&req.SliceGenerations, "slice-generations", 0, "generations per slice (default 2)")
	f.IntVar(&req.MaxSlices, "max-slices", 0, "stop after this many slices (0: until every target is met)")
	f.IntVar(&req.Settings.GamesPerGeneration, "games", 0, "self-play games per generation (default 1000)")
	searchFlags(f, &req.Settings)
	f.IntVar(&req.Settings.EvalGames, "eval-games", 0, "gauntlet games per opponent (default 40)")
	f.IntVar(&req.Settings.Quality.MinGames, "min-games", 0, "minimum games the quality gate needs (default 1000)")
	f.DurationVar(&sync, "sync-interval", 0, "how often a node uploads finished games (default 5s)")
	_ = start.MarkFlagRequired("cluster")
	_ = start.MarkFlagRequired("config")

	cmd.AddCommand(start)
	cmd.AddCommand(d.showStop("Configs with priority and why, and the slices run", "Stop the scheduler; its loops stop after their generation in flight")...)
	return cmd
}

// parseScheduleConfig reads CONFIG[:WEIGHT[:QUOTA[:TARGET_ELO]]].
func parseScheduleConfig(s string) (api.ScheduleConfig, error) {
	parts := strings.Split(s, ":")
	sc := api.ScheduleConfig{Config: parts[0]}
	if sc.Config == "" || len(parts) > 4 {
		return sc, fmt.Errorf("--config %q: want CONFIG[:WEIGHT[:QUOTA[:TARGET_ELO]]]", s)
	}
	for i, dst := range []*float64{&sc.Weight, &sc.Quota, &sc.TargetElo} {
		if i+1 >= len(parts) || parts[i+1] == "" {
			continue
		}
		v, err := strconv.ParseFloat(parts[i+1], 64)
		if err != nil {
			return sc, fmt.Errorf("--config %q: %q is not a number", s, parts[i+1])
		}
		*dst = v
	}
	return sc, nil
}

func scheduleTable(w *tabwriter.Writer, sc api.SelfplaySchedule) {
	st := sc.State
	fmt.Fprintf(w, "cluster\t%s\nstatus\t%s\nphase\t%s\nslices\t%d\n", sc.Cluster, sc.Status, st.Phase, st.Slices)
	if sc.Error != "" {
		fmt.Fprintf(w, "error\t%s\n", sc.Error)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "CONFIG\tPRIORITY\tWHY\tSLICES\tVELOCITY\tQUALITY\tBEST ELO\tTARGET\tNEXT SLICE")
	for _, r := range st.Ranking {
		for _, c := range st.Configs {
			if c.Config == r.Config {
				fmt.Fprintf(w, "%s\t%.2f\t%s\t%d\t%.1f\t%.2f\t%.0f\t%.0f\t%v\n", c.Config, r.Priority, r.Why, c.Slices, c.Velocity, c.Quality, c.BestElo, c.TargetElo, c.ExpectedSlice.Round(time.Second))
			}
		}
	}
	if len(st.History) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "STARTED\tCONFIG\tPRIORITY\tRESULT")
		for _, h := range st.History {
			fmt.Fprintf(w, "%s\t%s\t%.2f\t%s\n", h.Started.Local().Format(time.DateTime), h.Config, h.Priority, h.Result)
		}
	}
}

// loopPath turns CLUSTER/CONFIG into the loop's API path.
func loopPath(id string) (string, error) {
	cl, cfg, ok := strings.Cut(id, "/")
	if !ok || cl == "" || cfg == "" || strings.Contains(cfg, "/") {
		return "", fmt.Errorf("loop %q: want CLUSTER/CONFIG, e.g. lab/square8_2p", id)
	}
	return "/v1/selfplay/" + url.PathEscape(cl) + "/" + url.PathEscape(cfg), nil
}

func selfplayTable(w *tabwriter.Writer, sp api.Selfplay) {
	st := sp.State
	fmt.Fprintf(w, "loop\t%s\nstatus\t%s\nphase\t%s\n", sp.ID, sp.Status, st.Phase)
	if st.Node != "" {
		fmt.Fprintf(w, "node\t%s\n", st.Node)
	}
	fmt.Fprintf(w, "generation\t%d (%d completed)\ngames\t%d\nbest\t%s (Elo %.0f, velocity %s)\nlost activities\t%d\nmoved off draining nodes\t%d\n",
		st.Generation, st.Completed, st.TotalGames, orDash(st.Best), sp.BestElo, velocityText(sp.Velocity, sp.VelocityNote), st.Failures, st.Drains)
	if d := st.Durations["generation"]; d != nil {
		mean, p90 := d.Predict()
		fmt.Fprintf(w, "generation takes\t%v (p90 %v, %d measured)\n", mean.Round(time.Second), p90.Round(time.Second), d.N)
	}
	if sp.Live != nil {
		fmt.Fprintf(w, "self-play now\t%d/%d games synced (%d resumed, %d played, %d uploads)\n", sp.Live.Synced, sp.Live.Target, sp.Live.Resumed, sp.Live.Played, sp.Live.Batches)
	}
	if st.Reason != "" {
		fmt.Fprintf(w, "reason\t%s\n", st.Reason)
	}
	if sp.Error != "" {
		fmt.Fprintf(w, "error\t%s\n", sp.Error)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "GEN\tSTATE\tNODES\tGAMES\tQUALITY\tPOSITIONS\tCANDIDATE\tVS BEST\tVS RANDOM\tVS HEURISTIC\tELO")
	for _, g := range st.Generations {
		vs := map[string]string{}
		for _, r := range g.Gauntlet {
			key := r.Opponent
			if key != "random" && key != "heuristic" {
				key = "best"
			}
			vs[key] = fmt.Sprintf("%d-%d-%d", r.Wins, r.Draws, r.Losses)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%.2f\t%d\t%s\t%s\t%s\t%s\t%.0f\n", g.N, g.State, phaseNodes(g), g.Games, g.Quality.Score, g.Positions,
			orDash(g.Model), orDash(vs["best"]), orDash(vs["random"]), orDash(vs["heuristic"]), g.Elo)
	}
}

func leaderboardTable(w *tabwriter.Writer, boards []api.Leaderboard, history bool) {
	for i, b := range boards {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s\tElo velocity %s\n", b.Config, velocityText(b.Velocity, b.VelocityNote))
		fmt.Fprintln(w, "RANK\tMODEL\tLOOP\tELO\tGAMES\tW-D-L")
		for r, e := range b.Entries {
			name := e.Model
			if e.Best {
				name += " (best)"
			}
			if e.Anchor {
				name += " (anchor)"
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%.0f\t%d\t%d-%d-%d\n", r+1, name, orDash(e.Loop), e.Elo, e.Games, e.Wins, e.Draws, e.Losses)
		}
		if history {
			fmt.Fprintln(w, "AT\tA\tB\tW-D-L\tELO A\tΔ A")
			for _, m := range b.Matches {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d-%d-%d\t%.0f\t%+.1f\n", m.At.Local().Format(time.DateTime), m.A, m.B, m.Wins, m.Draws, m.Losses, m.EloA, m.DeltaA)
			}
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// newIdleCmd: `trainyard selfplay idle start|show|stop`.
func newIdleCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "idle", Short: "A cluster's idle-resource daemon: a GPU idle > 10 min gets self-play matched to its VRAM tier"}
	d := daemonCLI[api.SelfplayIdle]{cf, "/v1/selfplay-idle", idleTable}
	var req api.SelfplayIdleStart
	var configs []string
	var sync time.Duration
	start := &cobra.Command{
		Use:   "start --cluster NAME --config CONFIG... [flags]",
		Short: "Start the daemon: GPUs idle for --threshold get a self-play loop for the biggest board that fits their VRAM",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, c := range configs {
				req.Configs = append(req.Configs, api.ScheduleConfig{Config: c})
			}
			req.Settings.SyncInterval = sync
			return d.start(cmd, req)
		},
	}
	f := start.Flags()
	f.StringVar(&req.Cluster, "cluster", "", "cluster to watch (required)")
	f.StringArrayVar(&configs, "config", nil, "a config it may start (repeatable)")
	f.DurationVar(&req.Threshold, "threshold", 0, "how long a GPU must be idle (default 10m)")
	f.DurationVar(&req.Poll, "poll", 0, "how often to look (default 1m)")
	f.IntVar(&req.Settings.Generations, "generations", 0, "generations per started loop (0: until stopped)")
	f.IntVar(&req.Settings.GamesPerGeneration, "games", 0, "self-play games per generation (default 1000)")
	searchFlags(f, &req.Settings)
	f.IntVar(&req.Settings.EvalGames, "eval-games", 0, "gauntlet games per opponent (default 40)")
	f.IntVar(&req.Settings.Quality.MinGames, "min-games", 0, "minimum games the quality gate needs (default 1000)")
	f.DurationVar(&sync, "sync-interval", 0, "how often a node uploads finished games (default 5s)")
	_ = start.MarkFlagRequired("cluster")
	_ = start.MarkFlagRequired("config")
	cmd.AddCommand(start)
	cmd.AddCommand(d.showStop("The GPUs, since when each is idle, the loops started and the decisions", "Stop the daemon (the loops it started go on)")...)
	return cmd
}

func idleTable(w *tabwriter.Writer, d api.SelfplayIdle) {
	st := d.State
	fmt.Fprintf(w, "cluster\t%s\nstatus\t%s\nphase\t%s\npolls\t%d\n", d.Cluster, d.Status, st.Phase, st.Polls)
	if d.Error != "" {
		fmt.Fprintf(w, "error\t%s\n", d.Error)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "GPU\tMODEL\tVRAM\tBUSY\tIDLE SINCE")
	for _, g := range st.GPUs {
		since := "-"
		if t, ok := st.Since[g.Key()]; ok {
			since = t.Local().Format(time.DateTime)
		}
		fmt.Fprintf(w, "%s\t%s\t%d MB\t%v\t%s\n", g.Key(), g.Model, g.VRAMMB, g.Busy, since)
	}
	if len(st.Events) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "AT\tGPU\tCONFIG\tWHAT")
		for _, e := range st.Events {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", e.At.Local().Format(time.DateTime), orDash(e.GPU), orDash(e.Config), e.What)
		}
	}
}

// followSelfplay redraws one line for the generation in flight (phase,
// games synced as a bar while it plays, best model and Elo) and keeps a
// line per finished generation, until the loop stops or ctx ends.
func followSelfplay(ctx context.Context, c *apiclient.Client, path string, w io.Writer) error {
	tty := isTerminal(w)
	last, done := "", 0
	for {
		var sp api.Selfplay
		if err := c.JSON(ctx, http.MethodGet, path, nil, &sp); err != nil {
			return err
		}
		st := sp.State
		for _, g := range st.Generations { // generations that ended since the last poll
			if g.N > done && g.Ended != nil {
				if tty && last != "" {
					fmt.Fprint(w, "\r\033[K")
				}
				fmt.Fprintf(w, "gen %d %s: %d games, quality %.2f, %s\n", g.N, g.State, g.Games, g.Quality.Score, orDash(g.Model))
				done, last = g.N, ""
			}
		}
		line := selfplayLine(sp)
		if line != last {
			if tty {
				fmt.Fprintf(w, "\r\033[K%s", line)
			} else {
				fmt.Fprintln(w, line)
			}
			last = line
		}
		if sp.Status != "running" || st.Phase == "stopped" || st.Phase == "finished" || st.Phase == "failed" {
			if tty {
				fmt.Fprintln(w)
			}
			if sp.Status != "running" && sp.Status != "completed" {
				return fmt.Errorf("self-play loop %s %s: %s", sp.ID, sp.Status, firstNonEmpty(sp.Error, st.Reason))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(w)
			}
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

// selfplayLine is the live line: the phase, and a bar of games while the
// generation plays.
func selfplayLine(sp api.Selfplay) string {
	st := sp.State
	head := fmt.Sprintf("gen %d %-10s", st.Generation, st.Phase)
	if sp.Live != nil && st.Phase == "selfplay" {
		head = progressBar(head, int64(sp.Live.Synced), int64(sp.Live.Target), 20, func(n int64) string { return fmt.Sprint(n) }) + " games"
	}
	return fmt.Sprintf("%s  best %s (Elo %.0f)  total %d games", head, orDash(st.Best), sp.BestElo, st.TotalGames)
}

// velocityText is an Elo velocity as the tables show it: "12.5 Elo/day",
// or "too early" while there is under an hour of history.
func velocityText(v float64, note string) string {
	if note != "" {
		return "too early"
	}
	return fmt.Sprintf("%.1f Elo/day", v)
}

// searchFlags are the search settings every command that starts loops
// takes.
func searchFlags(f *pflag.FlagSet, s *selfplay.Settings) {
	f.IntVar(&s.Simulations, "simulations", 0, "MCTS simulations per move (default 64)")
	f.StringVar(&s.Search, "search", "", "root search: puct (default) or gumbel (Gumbel MuZero's sequential halving: with a model, strong with few simulations)")
}

// parseResources reads "cpus=2,gpus=1,memory_mb=4096" (any of them); ""
// is none.
func parseResources(flag, v string) (*selfplay.Resources, error) {
	if v == "" {
		return nil, nil
	}
	r := &selfplay.Resources{}
	for _, kv := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(kv), "=")
		var err error
		switch k {
		case "cpus":
			r.CPUs, err = strconv.ParseFloat(val, 64)
		case "gpus":
			r.GPUs, err = strconv.Atoi(val)
		case "memory_mb":
			r.MemoryMB, err = strconv.ParseInt(val, 10, 64)
		default:
			return nil, fmt.Errorf("%s: unknown resource %q (want cpus, gpus or memory_mb)", flag, k)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s=%q is not a number", flag, k, val)
		}
	}
	return r, nil
}

// phaseNodes is where a generation ran: one node, or, when its phases were
// placed apart, "play@A train@B gauntlet@C".
func phaseNodes(g selfplay.Generation) string {
	if (g.TrainNode == "" || g.TrainNode == g.Node) && (g.GauntletNode == "" || g.GauntletNode == g.Node) {
		return orDash(g.Node)
	}
	return fmt.Sprintf("play@%s train@%s gauntlet@%s", orDash(g.Node), orDash(g.TrainNode), orDash(g.GauntletNode))
}
