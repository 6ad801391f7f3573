package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/pluginbuild"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/plugins/builtin"
)

func newPluginCmd() *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{Use: "plugin", Short: "Build, upload, list, inspect and run WASM plugins"}
	addClientFlags(cmd, cf)

	var out, sdkDir string
	build := &cobra.Command{
		Use:   "build DIR",
		Short: "Compile a plugin: a Go package (wasip1, c-shared) or an AssemblyScript project (assembly/index.ts)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dst := out
			if dst == "" {
				abs, err := filepath.Abs(args[0])
				if err != nil {
					return err
				}
				dst = filepath.Base(abs) + ".wasm"
			}
			dst, _ = filepath.Abs(dst)
			if err := pluginbuild.Dir(cmd.Context(), args[0], sdkDir, dst); err != nil {
				return err
			}
			fmt.Fprintln(os.Stdout, dst)
			return nil
		},
	}
	build.Flags().StringVar(&sdkDir, "as-sdk", "", "the AssemblyScript SDK for AssemblyScript plugins (default: the project's "+pluginbuild.SDKCopy+", else sdk/assemblyscript)")
	build.Flags().StringVarP(&out, "out", "O", "", "output file (default DIR.wasm)")

	push := &cobra.Command{
		Use:   "push FILE.wasm",
		Short: "Upload a plugin; the server validates it and stores it by sha256",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			bar := newByteProgress(os.Stderr, "uploading "+filepath.Base(args[0]))
			if !bar.tty {
				fmt.Fprintf(os.Stderr, "uploading %s (%s)…\n", args[0], humanBytes(len(data)))
			}
			var rec pluginstore.Record
			err = c.Upload(cmd.Context(), "/v1/plugins", "module", filepath.Base(args[0]), data, &rec, bar.update)
			bar.done()
			if err != nil {
				return fmt.Errorf("push %s: %w", args[0], err)
			}
			return cf.print(os.Stdout, rec, func(w *tabwriter.Writer) { pluginTable(w, []pluginstore.Record{rec}) })
		},
	}

	ls := &cobra.Command{
		Use:   "ls",
		Short: "List uploaded plugins",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var resp struct {
				Plugins []pluginstore.Record `json:"plugins"`
			}
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/plugins", nil, &resp); err != nil {
				return err
			}
			return cf.print(os.Stdout, resp.Plugins, func(w *tabwriter.Writer) { pluginTable(w, resp.Plugins) })
		},
	}

	inspect := &cobra.Command{
		Use:   "inspect REF",
		Short: "Show a plugin's metadata (REF: sha256, name@version or name)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var rec pluginstore.Record
			if err := c.JSON(cmd.Context(), http.MethodGet, "/v1/plugins/"+url.PathEscape(args[0]), nil, &rec); err != nil {
				return err
			}
			if cf.output == "table" {
				cf.output = "yaml" // metadata is nested; YAML reads best
			}
			return cf.print(os.Stdout, rec, nil)
		},
	}

	rm := &cobra.Command{
		Use:   "rm REF",
		Short: "Delete a plugin (refused while running work uses it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			return c.JSON(cmd.Context(), http.MethodDelete, "/v1/plugins/"+url.PathEscape(args[0]), nil, nil)
		},
	}

	var envsN, steps int
	var seed uint64
	var remote bool
	run := &cobra.Command{
		Use:   "run FILE.wasm|REF",
		Short: "Random-action rollout of an env plugin; prints steps/s and episode statistics",
		Long: "run loads a local .wasm file (or downloads an uploaded plugin by REF) and steps it here with\n" +
			"random actions under the sandbox limits. With --remote it runs on a worker through the API instead.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if remote {
				return remoteRun(ctx, cf, args[0], envsN, steps, seed)
			}
			wasm, err := pluginModule(ctx, cf, args[0])
			if err != nil {
				return err
			}
			rt, err := pluginhost.NewRuntime(ctx, pluginhost.RuntimeConfig{})
			if err != nil {
				return err
			}
			defer rt.Close(context.Background())
			mod, err := rt.Load(ctx, wasm, pluginhost.LoadOptions{})
			if err != nil {
				return err
			}
			env, err := mod.NewVecEnv(ctx, mod.Metadata().Slots(envsN), seed)
			if err != nil {
				return err
			}
			defer env.Close()
			st, err := pluginhost.Rollout(ctx, env, steps, seed)
			if err != nil {
				return err
			}
			return cf.print(os.Stdout, st, func(w *tabwriter.Writer) { statsTable(w, mod.Metadata().Label(), st) })
		},
	}
	run.Flags().IntVar(&envsN, "envs", 64, "instances stepped per batch (a multi-agent env's games: one slot per agent each)")
	run.Flags().IntVar(&steps, "steps", 100000, "environment steps in total")
	run.Flags().Uint64Var(&seed, "seed", 1, "seed for the envs and the random actions")
	run.Flags().BoolVar(&remote, "remote", false, "run REF on a worker through the API")

	cmd.AddCommand(newPluginInitCmd(), build, push, ls, inspect, rm, run)
	return cmd
}

// pluginModule reads a local .wasm file, else downloads an uploaded plugin,
// else takes a built-in one: a name works with no server too.
func pluginModule(ctx context.Context, cf *clientFlags, ref string) ([]byte, error) {
	wasm, ferr := os.ReadFile(ref)
	if ferr == nil {
		return wasm, nil
	}
	var derr error
	if c, err := cf.client(); err != nil {
		derr = err
	} else if derr = c.Do(ctx, http.MethodGet, "/v1/plugins/"+url.PathEscape(ref)+"/module", nil, "", &wasm); derr == nil {
		return wasm, nil
	}
	wasm, berr := pluginstore.BuiltinModule(builtin.FS(), ref)
	if berr != nil {
		return nil, fmt.Errorf("%s is not a readable file (%v), an uploaded plugin (%v) or a built-in one (%w)", ref, ferr, derr, berr)
	}
	return wasm, nil
}

func remoteRun(ctx context.Context, cf *clientFlags, ref string, envsN, steps int, seed uint64) error {
	c, err := cf.client()
	if err != nil {
		return err
	}
	var resp struct {
		WorkflowID string                  `json:"workflow_id"`
		Plugin     string                  `json:"plugin"`
		Stats      pluginhost.RolloutStats `json:"stats"`
	}
	body := map[string]any{"envs": envsN, "steps": steps, "seed": seed}
	if err := c.JSON(ctx, http.MethodPost, "/v1/plugins/"+url.PathEscape(ref)+"/test-runs", body, &resp); err != nil {
		return err
	}
	return cf.print(os.Stdout, resp, func(w *tabwriter.Writer) { statsTable(w, resp.Plugin, resp.Stats) })
}

func pluginTable(w *tabwriter.Writer, recs []pluginstore.Record) {
	fmt.Fprintln(w, "ID\tNAME\tVERSION\tKIND\tSIZE\tUPLOADED")
	for _, r := range recs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID[:12], r.Name, r.Version, r.Kind, humanBytes(int(r.SizeBytes)), r.UploadedAt.Local().Format(time.DateTime))
	}
}

func statsTable(w *tabwriter.Writer, label string, st pluginhost.RolloutStats) {
	fmt.Fprintf(w, "plugin\t%s\n", label)
	fmt.Fprintf(w, "steps\t%d\n", st.Steps)
	fmt.Fprintf(w, "steps/s\t%.0f\n", st.StepsPerSec)
	fmt.Fprintf(w, "episodes\t%d\n", st.Episodes)
	if st.Episodes > 0 {
		fmt.Fprintf(w, "return mean/min/max\t%.2f / %.2f / %.2f\n", st.MeanReturn, st.MinReturn, st.MaxReturn)
		fmt.Fprintf(w, "episode length mean\t%.1f\n", st.MeanLength)
	}
}

func humanBytes(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}
