package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/plugins/builtin"
	"github.com/trainyard/trainyard/workflows/train"
)

// localRunID names a local run (and its checkpoints in --checkpoint-dir).
const localRunID = "local"

// runLocal is `run train --local`: the run's segments on this process's
// learner (the agent's Runner, checkpoints in dir when one is given), the
// followed run train's progress line, and `run show -o json`'s document.
func runLocal(ctx context.Context, cf *clientFlags, spec training.Spec, dir string, w io.Writer) error {
	if len(spec.Command) > 0 {
		return fmt.Errorf("run train --local trains the built-in learner: give --env PLUGIN, not a command")
	}
	spec = spec.WithDefaults()
	check := spec
	if check.Cluster == "" {
		check.Cluster = localRunID // no cluster needed here
	}
	if err := check.Validate(); err != nil {
		return fmt.Errorf("run train --local: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if spec.Distributed() {
		return fmt.Errorf("run train --local: --rollout-workers needs a cluster")
	}
	mods := training.Modules{}
	in := train.Input{RunID: localRunID, Spec: spec}
	var err error
	if in.EnvPlugin, err = localPlugin(mods, spec.Env); err != nil {
		return err
	}
	if spec.Reward != "" {
		if in.RewardPlugin, err = localPlugin(mods, spec.Reward); err != nil {
			return err
		}
	}
	cache := ""
	if d, err := os.UserCacheDir(); err == nil {
		cache = filepath.Join(d, "trainyard", "wasm")
	}
	rt, err := newPluginRuntime(ctx, cache)
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())
	runner := &training.Runner{Plugins: rt, Modules: mods}
	if dir != "" {
		if runner.Checkpoints, err = checkpoint.NewDir(dir, checkpoint.Options{}); err != nil {
			return err
		}
	}

	run := api.Run{RunSummary: api.RunSummary{ID: localRunID, Name: spec.Name, Cluster: spec.Cluster, Env: spec.Env, Status: "running", StartTime: time.Now().UTC()}, Spec: spec}
	tty := cf.output == "table" && isTerminal(w)
	show := func(r api.Run) {
		if cf.output != "table" {
			return
		}
		if tty {
			fmt.Fprintf(w, "\r\033[K%s", progressLine(r))
		} else {
			fmt.Fprintln(w, progressLine(r))
		}
	}
	p, err := train.RunLocal(ctx, runner, in, func(p train.RunProgress, m learner.Metrics) {
		run.Progress, run.Live = p, &m
		show(run)
	})
	closed := time.Now().UTC()
	run.Progress, run.Live, run.CloseTime = p, nil, &closed
	run.Status = "completed"
	if err != nil {
		run.Status, run.Error = "failed", err.Error()
		if errors.Is(err, context.Canceled) {
			run.Status, run.Progress.State = "canceled", "cancelled"
		}
	}
	show(run)
	if tty {
		fmt.Fprintln(w)
	}
	if cf.output == "table" && p.Eval != nil {
		fmt.Fprintf(w, "evaluation: %d episodes, mean return %.2f\n", p.Eval.Episodes, p.Eval.ReturnMean)
	}
	if cf.output != "table" {
		if perr := cf.print(w, run, nil); perr != nil {
			return perr
		}
	}
	switch {
	case err != nil:
		return fmt.Errorf("run %s %s: %w", localRunID, run.Status, err)
	case p.State == "completed": // the budget is spent short of the target
		return fmt.Errorf("run %s completed: %s", localRunID, p.Reason)
	}
	return nil
}

// localPlugin resolves a plugin with no server: a .wasm file, else one of
// the built-ins the binary carries. It adds the module to mods and returns
// its sha256.
func localPlugin(mods training.Modules, ref string) (string, error) {
	wasm, ferr := os.ReadFile(ref)
	if ferr != nil {
		var err error
		if wasm, err = pluginstore.BuiltinModule(builtin.FS(), ref); err != nil {
			if strings.HasSuffix(ref, ".wasm") {
				return "", fmt.Errorf("plugin %s: %w", ref, ferr)
			}
			return "", fmt.Errorf("run train --local: %w (--local takes a built-in plugin or a .wasm file)", err)
		}
	}
	sha := pluginhost.SHA256(wasm)
	mods[sha] = wasm
	return sha, nil
}
