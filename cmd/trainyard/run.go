package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/apiclient"
	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/training"
)

func newRunCmd() *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{Use: "run", Short: "Training runs: train, llm, ls, algorithms, show, logs, pause, resume, cancel, checkpoints, download, scalars, tensorboard"}
	addClientFlags(cmd, cf)

	var spec training.Spec
	var target float64
	var hyper []string
	var pols policyFlags
	var detach, local bool
	var ckptDir string
	trainCmd := &cobra.Command{
		Use:   "train --cluster NAME (--env PLUGIN | [--gpus N] -- COMMAND [ARGS...]) [flags]",
		Short: "Submit a training run and follow it with a live progress line (--detach to only submit)",
		Long: "train submits a run of the built-in learner (PPO unless --algorithm says otherwise). --env (and --reward) take an uploaded plugin's\n" +
			"sha256, name@version or name, or a local .wasm file, which is uploaded first. The seed-000 knobs\n" +
			"are --workers, --envs-per-worker, --episode-length and --batch-size; the algorithm's other hyper-parameters\n" +
			"go through --set name=value (learning_rate, gamma, gae_lambda, epochs, hidden=64,64, ...).\n" +
			"After --, a command is run instead as a bring-your-own trainer with --gpus GPUs and\n" +
			"$TRAINYARD_CHECKPOINT_DIR, which is synced to S3 and restored before any restart; with --env too,\n" +
			"it gets an env server for that plugin ($TRAINYARD_ENV_SOCKET: Python's trainyard.envs.make).\n" +
			"--local trains in this process instead (no server, cluster or S3; built-in plugins or .wasm files),\n" +
			"with the same progress line and, with -o json, the document `run show -o json` prints.",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("target-return") {
				spec.TargetReturn = &target
			}
			if err := pols.apply(&spec); err != nil {
				return err
			}
			if local {
				spec.Command = args
				var err error
				if spec.Hyperparameters, err = parseSets(hyper); err != nil {
					return err
				}
				return runLocal(cmd.Context(), cf, spec, ckptDir, os.Stdout)
			}
			if spec.Cluster == "" {
				return fmt.Errorf(`required flag(s) "cluster" not set (or --local to train in this process)`)
			}
			if len(args) > 0 {
				if spec.Algorithm != "" && spec.Algorithm != training.AlgorithmCommand {
					return fmt.Errorf("run train: -- COMMAND runs your own trainer; --algorithm %s is the built-in learner's", spec.Algorithm)
				}
				spec.Algorithm, spec.Command = training.AlgorithmCommand, args
			} else if spec.Env == "" {
				return fmt.Errorf("run train: give --env PLUGIN for the built-in learner, or -- COMMAND for your own trainer")
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if spec.Env, err = pluginRef(ctx, c, spec.Env); err != nil {
				return err
			}
			if spec.Reward, err = pluginRef(ctx, c, spec.Reward); err != nil {
				return err
			}
			if spec.Hyperparameters, err = parseSets(hyper); err != nil {
				return err
			}
			return submitRun(ctx, c, spec, detach || cf.output != "table", "run")
		},
	}
	addRunSpecFlags(trainCmd.Flags(), &spec, &target, &hyper)
	f := trainCmd.Flags()
	pols.add(f)
	f.BoolVar(&detach, "detach", false, "print the run id and return at once")
	f.BoolVar(&local, "local", false, "train in this process: no server, cluster or S3 (built-in plugins or .wasm files)")
	f.StringVar(&ckptDir, "checkpoint-dir", "", "with --local: checkpoint each segment into this directory (S3's layout); a run there continues from its newest checkpoint")

	ls := &cobra.Command{
		Use: "ls", Short: "List training runs", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var out struct {
				Runs []api.RunSummary `json:"runs"`
			}
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/runs", nil, &out); err != nil {
				return err
			}
			if quiet, _ := cmd.Flags().GetBool("quiet"); quiet {
				for _, r := range out.Runs {
					fmt.Println(r.ID)
				}
				return nil
			}
			return cf.print(os.Stdout, out, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tNAME\tCLUSTER\tENV\tSTATUS\tSTARTED")
				for _, r := range out.Runs {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Name, r.Cluster, r.Env, r.Status, r.StartTime.Local().Format(time.DateTime))
				}
			})
		},
	}

	ls.Flags().BoolP("quiet", "q", false, "only the ids, newest first (run=$(trainyard run ls -q | head -1))")

	algorithms := &cobra.Command{
		Use: "algorithms", Short: "List the algorithms a run may name (--algorithm, a spec's algorithm)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var out struct {
				Algorithms []api.AlgorithmInfo `json:"algorithms"`
			}
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/algorithms", nil, &out); err != nil {
				return err
			}
			return cf.print(os.Stdout, out, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ALGORITHM\tSHAPE\tKIND\tWHAT")
				for _, a := range out.Algorithms {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", a.Name, a.Shape, orDash(a.Kind), a.Doc)
				}
			})
		},
	}

	show := &cobra.Command{
		Use: "show ID", Short: "A run's state, node, latest metrics, checkpoints and why it waits", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			r, err := getRun(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			return cf.print(os.Stdout, r, func(w *tabwriter.Writer) { runTable(w, r) })
		},
	}

	logs := &cobra.Command{
		Use: "logs ID", Short: "A run's log: one line per iteration and event, or a command run's output (-f follows)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			follow, _ := cmd.Flags().GetBool("follow")
			if r, err := getRun(cmd.Context(), c, args[0]); err == nil && r.Spec.Shape().Process() {
				rank, _ := cmd.Flags().GetInt("rank")
				if rank >= max(r.Spec.Nodes, 1) {
					return fmt.Errorf("run %s has no rank %d (its trainer has %d process(es))", args[0], rank, max(r.Spec.Nodes, 1))
				}
				return commandRunLogs(cmd.Context(), c, args[0], rank, follow)
			}
			seen := 0
			for {
				var out struct {
					Lines []string `json:"lines"`
				}
				if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/runs/"+url.PathEscape(args[0])+"/logs", nil, &out); err != nil {
					return err
				}
				// The state line is last and changes: print iteration lines once.
				body := out.Lines
				if follow && len(body) > 0 && strings.HasPrefix(body[len(body)-1], "state ") {
					body = body[:len(body)-1]
				}
				for _, l := range body[min(seen, len(body)):] {
					fmt.Fprintln(os.Stdout, l)
				}
				seen = len(body)
				if !follow {
					return nil
				}
				r, err := getRun(cmd.Context(), c, args[0])
				if err != nil {
					return err
				}
				if r.Status != "running" {
					for _, l := range api.RunLogLines(r)[seen:] {
						fmt.Fprintln(os.Stdout, l)
					}
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(time.Second):
				}
			}
		},
	}
	logs.Flags().BoolP("follow", "f", false, "keep printing until the run ends")
	logs.Flags().Int("rank", 0, "a multi-node command run's rank (--nodes): its own output")

	verb := func(name, short string) *cobra.Command {
		return &cobra.Command{
			Use: name + " ID", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				var r api.Run
				if err := c.JSON(cmd.Context(), http.MethodPost, "/v1/runs/"+url.PathEscape(args[0])+"/"+name, nil, &r); err != nil {
					return err
				}
				return cf.print(os.Stdout, r, func(w *tabwriter.Writer) {
					fmt.Fprintf(w, "%s\t%s requested (state now %s)\n", r.ID, name, r.Progress.State)
				})
			},
		}
	}

	ckpts := &cobra.Command{
		Use: "checkpoints ID", Short: "A run's checkpoints in S3", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var out struct {
				Checkpoints []api.CheckpointInfo `json:"checkpoints"`
			}
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/runs/"+url.PathEscape(args[0])+"/checkpoints", nil, &out); err != nil {
				return err
			}
			return cf.print(os.Stdout, out, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "SEQ\tITERATION\tMEAN RETURN\tSIZE\tCREATED\tMANIFEST")
				for _, m := range out.Checkpoints {
					fmt.Fprintf(w, "%d\t%d\t%.2f\t%d\t%s\t%s\n", m.Seq, m.Iteration, m.Metrics[training.MetricReturn], m.SizeBytes, m.Created.Local().Format(time.DateTime), m.Manifest)
				}
			})
		},
	}

	var outDir string
	download := &cobra.Command{
		Use: "download ID SEQ|latest", Short: "Download a checkpoint's files (verified) into a directory", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			seq, err := strconv.ParseInt(args[1], 10, 64)
			if args[1] != "latest" && (err != nil || seq < 1) {
				return fmt.Errorf("checkpoint %q: want latest or a sequence number from `trainyard run checkpoints %s`", args[1], args[0])
			}
			var out struct {
				Checkpoints []api.CheckpointInfo `json:"checkpoints"`
			}
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/runs/"+url.PathEscape(args[0])+"/checkpoints", nil, &out); err != nil {
				return err
			}
			if args[1] == "latest" {
				for _, m := range out.Checkpoints {
					seq = max(seq, m.Seq)
				}
			}
			for _, m := range out.Checkpoints {
				if m.Seq != seq {
					continue
				}
				if err := os.MkdirAll(outDir, 0o755); err != nil {
					return err
				}
				for _, f := range m.Files {
					var b []byte
					p := fmt.Sprintf("/v1/runs/%s/checkpoints/%d/files/%s", url.PathEscape(args[0]), seq, url.PathEscape(f))
					if err := c.Do(cmd.Context(), http.MethodGet, p, nil, "", &b); err != nil {
						return err
					}
					dst := filepath.Join(outDir, filepath.FromSlash(f))
					if err := os.WriteFile(dst, b, 0o644); err != nil {
						return err
					}
					fmt.Fprintln(os.Stdout, dst)
				}
				return nil
			}
			return fmt.Errorf("run %s has no checkpoint %d (see `trainyard run checkpoints %s`)", args[0], seq, args[0])
		},
	}
	download.Flags().StringVarP(&outDir, "dir", "d", ".", "directory to write the files to")

	cmd.AddCommand(trainCmd, newRunLLMCmd(cf), ls, algorithms, show, logs, verb("pause", "Pause a run at its next checkpoint"),
		verb("resume", "Resume a paused run"), verb("cancel", "Cancel a run (its checkpoints stay)"), ckpts, download)
	cmd.AddCommand(curveCmds(cf, "ID", "a run", func(id string) (string, error) { return "/v1/runs/" + url.PathEscape(id), nil })...)
	return cmd
}

// learnerAlgorithms names the registered algorithms a training run trains
// with the built-in learner.
func learnerAlgorithms() string {
	var ns []string
	for _, a := range training.Algorithms() {
		if a.Kind == "" && a.Shape.Learns() {
			ns = append(ns, a.Name)
		}
	}
	return strings.Join(ns, ", ")
}

// addRunSpecFlags binds a run spec's fields (shared by run train and sweep
// run, whose trials start from such a spec).
func addRunSpecFlags(f *pflag.FlagSet, spec *training.Spec, target *float64, hyper *[]string) {
	f.StringVar(&spec.Cluster, "cluster", "", "cluster to train on (required)")
	f.StringVar(&spec.Env, "env", "", "env plugin: sha256, name@version, name or a .wasm file (required for the built-in learner)")
	f.StringVar(&spec.Algorithm, "algorithm", "", "the built-in learner's algorithm: "+learnerAlgorithms()+" (default ppo; `trainyard run algorithms` lists them); -- COMMAND sets command")
	f.IntVar(&spec.GPUs, "gpus", 0, "GPUs for a command trainer (CUDA_VISIBLE_DEVICES); per node with --nodes")
	f.IntVar(&spec.GPUs, "gpus-per-node", 0, "the same as --gpus, for a multi-node trainer")
	f.IntVar(&spec.Nodes, "nodes", 0, "run the command on this many nodes as one gang, with torch.distributed's MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK (default 1)")
	f.IntVar(&spec.SyncEverySeconds, "sync-every", 0, "seconds between checkpoint-dir syncs of a command trainer (default 30)")
	f.StringVar(&spec.Reward, "reward", "", "reward-shaping plugin (optional)")
	f.StringVar(&spec.Name, "name", "", "a label for the run")
	f.IntVar(&spec.Workers, "workers", 0, "worker threads on the trainer (RAY_WORKERS; default 1)")
	f.IntVar(&spec.EnvsPerWorker, "envs-per-worker", 0, "env instances per worker (ENVS_PER_WORKER; default 8)")
	f.IntVar(&spec.EpisodeLength, "episode-length", 0, "env steps per instance per iteration (EPISODE_LENGTH)")
	f.IntVar(&spec.BatchSize, "batch-size", 0, "minibatch size (BATCH_SIZE)")
	f.IntVar(&spec.RolloutWorkers, "rollout-workers", 0, "distributed rollouts: this many rollout workers on the cluster's nodes (0 GPUs; default 0: in the trainer)")
	f.Float64Var(&spec.RolloutCPUs, "rollout-cpus", 0, "CPUs each rollout worker reserves (default 1)")
	f.IntVar(&spec.Iterations, "iterations", 0, "stop after this many iterations (default 500)")
	f.Float64Var(target, "target-return", 0, "stop once the mean return of the last 100 episodes reaches this")
	f.IntVar(&spec.CheckpointEvery, "checkpoint-every", 0, "iterations between checkpoints (default 10)")
	f.IntVar(&spec.KeepCheckpoints, "keep-checkpoints", 0, "checkpoints kept besides the best (default 3)")
	f.Uint64Var(&spec.Seed, "seed", 0, "seed for weights, envs and sampling")
	f.Float64Var(&spec.CPUs, "cpus", 0, "CPUs the trainer reserves (default: workers)")
	f.Int64Var(&spec.MemoryMB, "memory-mb", 0, "memory the trainer reserves (default 512)")
	f.StringArrayVar(hyper, "set", nil, "the algorithm's hyper-parameter name=value (repeatable; GET /v1/algorithms lists them)")
	// Not --config: that is the global config-file flag.
	f.StringVar(&spec.Config, "quota-config", "", "quota key, e.g. a game config (hexagonal_2p): config quotas and one training per config apply")
	f.IntVar(&spec.Priority, "priority", 0, "higher places first among waiting work")
}

func getRun(ctx context.Context, c *apiclient.Client, id string) (api.Run, error) {
	var r api.Run
	err := c.JSON(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, &r)
	return r, err
}

func runTable(w *tabwriter.Writer, r api.Run) {
	p := r.Progress
	state := p.State
	if p.Reason != "" {
		state += ": " + p.Reason
	}
	fmt.Fprintf(w, "run\t%s\nname\t%s\ncluster\t%s\nenv\t%s\nstatus\t%s\nstate\t%s\nnode\t%s\n", r.ID, r.Name, r.Cluster, r.Env, r.Status, state, p.Node)
	if r.Waiting != "" {
		fmt.Fprintf(w, "waiting on\t%s\n", r.Waiting)
	}
	if len(p.Ranks) > 0 {
		fmt.Fprintf(w, "ranks\t%s (rank 0 first; `run logs --rank N`)\n", strings.Join(p.Ranks, ", "))
	}
	if len(p.Nodes) > 0 {
		fmt.Fprintf(w, "ran on\t%s\n", strings.Join(p.Nodes, ", "))
	}
	if sh := r.Spec.Shape(); sh.Learns() || sh.Process() { // the loop reports steps of its own
		fmt.Fprintf(w, "iteration\t%d\ntimesteps\t%d\nmean return\t%.2f (best %.2f)\n", p.Iteration, p.Timesteps, p.MeanReturn, p.BestReturn)
	}
	fmt.Fprintf(w, "checkpoint\t%d\nplacements\t%d\nlost segments\t%d\nmoved off draining nodes\t%d\n", p.Checkpoint, p.Placements, p.Failures, p.Drains)
	if p.LastFailure != "" {
		fmt.Fprintf(w, "last lost segment\t%s\n", p.LastFailure)
	}
	if n := len(p.Metrics); n > 0 {
		m := p.Metrics[n-1]
		fmt.Fprintf(w, "last iteration\t%s\n", strings.TrimRight(fmt.Sprintf("steps/s %.0f  %s", m.StepsPerSecond, m.Brief()), " "))
	}
	loopRows(w, r)
	scalarsRows(w, r.Scalars)
	for _, rs := range p.Restores {
		fmt.Fprintf(w, "restored\tfrom checkpoint %d at iteration %d\n", rs.Checkpoint, rs.Iteration)
	}
	for _, rw := range p.RolloutWorkers {
		fmt.Fprintf(w, "rollout worker %d\t%s on %s (%d placements, %d lost)", rw.Worker, rw.State, orDash(rw.Node), rw.Placements, rw.Failures)
		if rw.Reason != "" {
			fmt.Fprintf(w, ": %s", rw.Reason)
		} else if rw.LastFailure != "" {
			fmt.Fprintf(w, "; last lost: %s", rw.LastFailure)
		}
		fmt.Fprintln(w)
	}
	if n := len(p.Metrics); n > 0 && len(p.Metrics[n-1].Rollouts) > 0 {
		var parts []string
		for _, f := range p.Metrics[n-1].Rollouts {
			parts = append(parts, fmt.Sprintf("worker %d on %s (weights v%d, %d steps, %.0f steps/s)", f.Worker, orDash(f.Node), f.WeightVersion, f.Steps, f.StepsPerSecond))
		}
		fmt.Fprintf(w, "last rollouts\t%s\n", strings.Join(parts, "; "))
	}
	if p.Eval != nil {
		fmt.Fprintf(w, "evaluation\t%d episodes, return %.2f (min %.1f, max %.1f)\n", p.Eval.Episodes, p.Eval.ReturnMean, p.Eval.ReturnMin, p.Eval.ReturnMax)
	}
	if p.Reason != "" {
		fmt.Fprintf(w, "reason\t%s\n", p.Reason)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error\t%s\n", r.Error)
	}
}

// submitRun submits spec, then prints its id (detach) or follows it;
// what names it for people ("run", "loop").
func submitRun(ctx context.Context, c *apiclient.Client, spec training.Spec, detach bool, what string) error {
	var ref struct {
		ID string `json:"id"`
	}
	if err := c.JSON(ctx, http.MethodPost, "/v1/runs", spec, &ref); err != nil {
		return err
	}
	if detach {
		fmt.Fprintln(os.Stdout, ref.ID)
		return nil
	}
	fmt.Fprintf(os.Stderr, "%s %s submitted; Ctrl-C stops following (the %s goes on; `trainyard run cancel %s` stops it)\n", what, ref.ID, what, ref.ID)
	return followRun(ctx, c, ref.ID, os.Stdout)
}

// followRun prints a progress line until the run ends: rewritten in place
// on a terminal, one line per change otherwise.
func followRun(ctx context.Context, c *apiclient.Client, id string, w io.Writer) error {
	tty := isTerminal(w)
	last := ""
	for {
		r, err := getRun(ctx, c, id)
		if err != nil {
			return err
		}
		line := progressLine(r)
		if line != last {
			if tty {
				fmt.Fprintf(w, "\r\033[K%s", line)
			} else {
				fmt.Fprintln(w, line)
			}
			last = line
		}
		if r.Status != "running" {
			if tty {
				fmt.Fprintln(w)
			}
			if r.Progress.Eval != nil {
				fmt.Fprintf(w, "evaluation: %d episodes, mean return %.2f\n", r.Progress.Eval.Episodes, r.Progress.Eval.ReturnMean)
			}
			if r.Status != "completed" {
				return fmt.Errorf("run %s %s: %s", id, r.Status, firstNonEmpty(r.Error, r.Progress.Reason))
			}
			if r.Progress.State == "completed" { // the budget is spent short of the target
				return fmt.Errorf("run %s completed: %s", id, r.Progress.Reason)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(w)
			}
			return nil
		case <-time.After(time.Second):
		}
	}
}

func progressLine(r api.Run) string {
	switch r.Spec.Shape() {
	case training.ShapeLoop:
		return loopProgressLine(r)
	case training.ShapeCommand:
		return commandProgressLine(r)
	}
	p := r.Progress
	it, ts, ret := p.Iteration, p.Timesteps, p.MeanReturn
	sps := 0.0
	if r.Live != nil && r.Live.Iteration > it {
		it, ts, ret, sps = r.Live.Iteration, r.Live.Timesteps, r.Live.RecentReturnMean, r.Live.StepsPerSecond
	} else if n := len(p.Metrics); n > 0 {
		sps = p.Metrics[n-1].StepsPerSecond
	}
	total := r.Spec.Iterations
	bar := ""
	if total > 0 {
		const width = 24
		done := min(width, int(int64(width)*it/int64(total)))
		bar = "[" + strings.Repeat("=", done) + strings.Repeat(" ", width-done) + "] "
	}
	s := fmt.Sprintf("%s%-9s iter %d/%d  steps %d  return %.1f  %.0f steps/s  ckpt %d", bar, p.State, it, total, ts, ret, sps, p.Checkpoint)
	if r.Spec.TargetReturn != nil {
		s += fmt.Sprintf("  target %.1f", *r.Spec.TargetReturn)
	}
	return s + waitingNote(r)
}

// waitingNote ends a progress line with why the run waits: its queue's
// reason, or what its work in flight waits on.
func waitingNote(r api.Run) string {
	switch {
	case r.Progress.State == "waiting" && r.Progress.Reason != "":
		return "  (" + r.Progress.Reason + ")"
	case r.Waiting != "":
		return "  (" + r.Waiting + ")"
	}
	return ""
}

// returnTags are the tags a command trainer's return is reported under,
// in the order they are looked for.
var returnTags = []string{"return", "episode_return", "episodic_return", "charts/episodic_return", "mean_return"}

// commandProgressLine shows what a command trainer reports itself
// (TRAINYARD_SCALAR lines): its newest step, its return when it reports
// one under a usual tag, and its first two other tags.
func commandProgressLine(r api.Run) string {
	p := r.Progress
	var step int64
	tags := make([]string, 0, len(r.Scalars))
	for tag, pt := range r.Scalars {
		step = max(step, pt.Step)
		tags = append(tags, tag)
	}
	sort.Strings(tags)
	s := fmt.Sprintf("%-9s step %d", p.State, step)
	for _, tag := range returnTags {
		if pt, ok := r.Scalars[tag]; ok {
			s += fmt.Sprintf("  return %.1f", pt.Value)
			break
		}
	}
	shown := 0
	for _, tag := range tags {
		if shown >= 2 {
			break
		}
		if slices.Contains(returnTags, tag) {
			continue
		}
		s += fmt.Sprintf("  %s %.4g", tag, r.Scalars[tag].Value)
		shown++
	}
	if p.Checkpoint > 0 {
		s += fmt.Sprintf("  ckpt %d", p.Checkpoint)
	}
	return s + waitingNote(r)
}

// pluginRef uploads a local .wasm file and returns its id; anything else
// is passed through as a reference.
func pluginRef(ctx context.Context, c *apiclient.Client, ref string) (string, error) {
	if ref == "" || !strings.HasSuffix(ref, ".wasm") {
		return ref, nil
	}
	b, err := os.ReadFile(ref)
	if err != nil {
		return "", fmt.Errorf("plugin %s: %w", ref, err)
	}
	var rec struct {
		ID string `json:"id"`
	}
	bar := newByteProgress(os.Stderr, "uploading "+filepath.Base(ref))
	err = c.Upload(ctx, "/v1/plugins", "module", filepath.Base(ref), b, &rec, bar.update)
	bar.done()
	if err != nil {
		return "", fmt.Errorf("upload %s: %w", ref, err)
	}
	return rec.ID, nil
}

// policyFlags are a multi-agent run's policies, mapping, policies_to_train
// and league as flags (docs/training.md "Multi-agent runs").
type policyFlags struct{ policies, mapping, train, sets, league []string }

func (p *policyFlags) add(f *pflag.FlagSet) {
	f.StringArrayVar(&p.policies, "policy", nil, "multi-agent envs: a policy NAME (a network), NAME=SCRIPT (a fixed one: tit_for_tat, always_cooperate, always_defect, nearest_landmark) or NAME=checkpoint:RUN_ID[@SEQ][:POLICY] (a network frozen from an earlier run); repeatable")
	f.StringArrayVar(&p.mapping, "policy-map", nil, "multi-agent envs: AGENT=POLICY, AGENT a name or a pattern (agent_*); repeatable")
	f.StringArrayVar(&p.train, "train-policy", nil, "multi-agent envs: a policy that learns (repeatable; default: every policy that is not a script or a checkpoint)")
	f.StringArrayVar(&p.sets, "policy-set", nil, "multi-agent envs: POLICY:NAME=VALUE, a hyper-parameter of one policy's network over the run's --set (repeatable)")
	f.StringArrayVar(&p.league, "league", nil, "multi-agent envs: AGENT=POLICY,POLICY,...: the agent (a name or a pattern) plays one of these frozen policies, drawn per episode (repeatable)")
}

func (p *policyFlags) apply(spec *training.Spec) error {
	for _, s := range p.policies {
		name, script, _ := strings.Cut(s, "=")
		if name == "" {
			return fmt.Errorf("--policy %q: want NAME or NAME=SCRIPT", s)
		}
		if spec.Policies == nil {
			spec.Policies = map[string]learner.Policy{}
		}
		if ref, ok := strings.CutPrefix(script, "checkpoint:"); ok {
			spec.Policies[name] = learner.Policy{Checkpoint: ref}
			continue
		}
		spec.Policies[name] = learner.Policy{Script: script}
	}
	for _, s := range p.mapping {
		agent, pol, ok := strings.Cut(s, "=")
		if !ok || agent == "" || pol == "" {
			return fmt.Errorf("--policy-map %q: want AGENT=POLICY", s)
		}
		if spec.PolicyMapping == nil {
			spec.PolicyMapping = map[string]string{}
		}
		spec.PolicyMapping[agent] = pol
	}
	if len(p.train) > 0 {
		spec.PoliciesToTrain = p.train
	}
	for _, s := range p.league {
		agent, members, ok := strings.Cut(s, "=")
		if !ok || agent == "" || members == "" {
			return fmt.Errorf("--league %q: want AGENT=POLICY,POLICY,...", s)
		}
		if spec.League == nil {
			spec.League = map[string][]string{}
		}
		spec.League[agent] = strings.Split(members, ",")
	}
	for _, s := range p.sets {
		name, set, ok := strings.Cut(s, ":")
		pol, have := spec.Policies[name]
		switch {
		case !ok || name == "":
			return fmt.Errorf("--policy-set %q: want POLICY:NAME=VALUE", s)
		case !have:
			return fmt.Errorf("--policy-set %q: no --policy %s", s, name)
		}
		hp, err := parseSets([]string{set})
		if err != nil {
			return fmt.Errorf("--policy-set %s: %w", name, err)
		}
		if pol.Hyperparameters == nil {
			pol.Hyperparameters = map[string]any{}
		}
		maps.Copy(pol.Hyperparameters, hp)
		spec.Policies[name] = pol
	}
	return nil
}

// parseSets turns name=value pairs into hyper-parameter overrides; values
// are JSON when they parse as JSON, comma lists become arrays of numbers.
func parseSets(sets []string) (map[string]any, error) {
	if len(sets) == 0 {
		return nil, nil
	}
	out := map[string]any{}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--set %q: want name=value", s)
		}
		var val any
		if err := json.Unmarshal([]byte(v), &val); err != nil {
			if strings.Contains(v, ",") {
				if err := json.Unmarshal([]byte("["+v+"]"), &val); err != nil {
					return nil, fmt.Errorf("--set %s: %q is neither a number, a bool nor a comma list", k, v)
				}
			} else {
				val = v
			}
		}
		out[k] = val
	}
	return out, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
