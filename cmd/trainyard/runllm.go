package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/training"
)

// newRunLLMCmd is `run llm -f loop.yaml`: submit a kind llm run (the
// LLM-RL loop) and follow it.
func newRunLLMCmd(cf *clientFlags) *cobra.Command {
	var file string
	var detach bool
	cmd := &cobra.Command{
		Use:   "llm -f LOOP.yaml [--detach]",
		Short: "Submit an LLM-RL loop (kind llm): rollout workers, trajectory pool, trainer and weight sync",
		Long: "llm submits a run of kind llm from a YAML run spec (docs/llm.md): the env plugin that calls the\n" +
			"granted endpoints, rollout_workers, and the llm section (steps, batch, max_concurrency, pool_capacity,\n" +
			"pool_policy, max_lag, sync_every, remote); the trainer is command (on gpus) or llm.remote. env may be a\n" +
			"local .wasm file, uploaded first. It then follows the loop: step, loss, trajectories/s, pool, lag.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := readLoopSpec(file)
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if spec.Env, err = pluginRef(ctx, c, spec.Env); err != nil {
				return err
			}
			return submitRun(ctx, c, spec, detach || cf.output != "table", "loop")
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the loop's run spec (YAML or JSON)")
	cmd.Flags().BoolVar(&detach, "detach", false, "print the run id and return at once")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// readLoopSpec reads a run spec file strictly (a misspelt field is an
// error, not a silent default) and makes it kind llm.
func readLoopSpec(file string) (training.Spec, error) {
	var spec training.Spec
	data, err := os.ReadFile(file)
	if err != nil {
		return spec, err
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return spec, fmt.Errorf("%s: %w", file, err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return spec, fmt.Errorf("%s: %w", file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return spec, fmt.Errorf("%s: %w", file, err)
	}
	if spec.Kind != "" && spec.Kind != training.KindLLM {
		return spec, fmt.Errorf("%s: kind %q: run llm submits kind llm (use run train for others)", file, spec.Kind)
	}
	spec.Kind = training.KindLLM
	return spec, nil
}

// loopRows are run show's rows of a kind llm run.
func loopRows(w *tabwriter.Writer, r api.Run) {
	st := r.Progress.Loop
	var workers []training.LoopWorkerStatus
	perSec := 0.0
	if r.Loop != nil {
		if r.Loop.Trainer != nil {
			st = r.Loop.Trainer
		}
		workers, perSec = r.Loop.Workers, r.Loop.TrajectoriesPerSec
	}
	if st == nil {
		return
	}
	loss := "-"
	if st.Loss != nil {
		loss = fmt.Sprintf("%.4f", *st.Loss)
	}
	fmt.Fprintf(w, "step\t%d/%d  loss %s\n", st.Step, st.Steps, loss)
	if perSec == 0 {
		perSec = st.TrajectoriesPerSec
	}
	fmt.Fprintf(w, "trajectories/s\t%.1f\n", perSec)
	p := st.Pool
	fmt.Fprintf(w, "pool\t%d/%d deep; %d put, %d taken, %d dropped, %d stale, %d duplicates; blocked %d puts for %.1fs\n",
		p.Depth, p.Capacity, p.Put, p.Taken, p.Dropped, p.Stale, p.Duplicates, p.BlockedPuts, p.BlockedSeconds)
	if p.Superseded > 0 {
		fmt.Fprintf(w, "superseded workers\t%d requests refused (rollout workers of an earlier trainer placement)\n", p.Superseded)
	}
	fmt.Fprintf(w, "off-policy lag\t%s\n", lagLine(p.Lag))
	for _, e := range st.Endpoints {
		line := fmt.Sprintf("serves weights v%d", e.Version)
		if e.Error != "" {
			line += "; last reload failed: " + e.Error
		}
		fmt.Fprintf(w, "endpoint %s\t%s\n", e.Name, line)
	}
	slices.SortFunc(workers, func(a, b training.LoopWorkerStatus) int { return a.Worker - b.Worker })
	for _, x := range workers {
		line := fmt.Sprintf("%d trajectories (%.1f/s), %d replayed, %d skipped", x.Episodes, x.PerSec, x.Replayed, x.Skipped)
		if x.Waiting != "" {
			line += "; waiting: " + x.Waiting
		}
		fmt.Fprintf(w, "worker %d on %s\t%s\n", x.Worker, orDash(x.Node), line)
	}
}

// lagLine renders a lag histogram: "0: 120  1: 30  ≥8: 0".
func lagLine(lag []int64) string {
	var parts []string
	for i, n := range lag {
		if n == 0 {
			continue
		}
		label := fmt.Sprint(i)
		if i == len(lag)-1 {
			label = "≥" + label
		}
		parts = append(parts, fmt.Sprintf("%s: %d", label, n))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "  ") + " (versions behind: trajectories)"
}

// loopProgressLine is the progress line of a kind llm run.
func loopProgressLine(r api.Run) string {
	p := r.Progress
	st := p.Loop
	perSec := 0.0
	if st != nil { // the trainer's result: its rate over the whole run
		perSec = st.TrajectoriesPerSec
	}
	if r.Loop != nil && r.Loop.Trainer != nil {
		st, perSec = r.Loop.Trainer, r.Loop.TrajectoriesPerSec
	}
	var steps int64
	if r.Spec.LLM != nil {
		steps = r.Spec.LLM.Steps
	}
	s := fmt.Sprintf("%-9s step 0/%d", p.State, steps)
	if st != nil {
		const width = 24
		done := 0
		if steps > 0 {
			done = min(width, int(int64(width)*st.Step/steps))
		}
		s = "[" + strings.Repeat("=", done) + strings.Repeat(" ", width-done) + "] " +
			fmt.Sprintf("%-9s step %d/%d  %.0f traj/s  pool %d/%d  weights v%d", p.State, st.Step, steps, perSec, st.Pool.Depth, st.Pool.Capacity, st.Checkpoint)
		if st.Loss != nil {
			s += fmt.Sprintf("  loss %.3f", *st.Loss)
		}
	}
	if r.Loop != nil {
		for _, w := range r.Loop.Workers {
			if w.Waiting != "" {
				return s + fmt.Sprintf("  (worker %d waiting: %s)", w.Worker, w.Waiting)
			}
		}
	}
	if p.State == "waiting" && p.Reason != "" {
		s += "  (" + p.Reason + ")"
	}
	return s
}
