package main

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/api"
	"github.com/trainyard/trainyard/internal/apiclient"
	"github.com/trainyard/trainyard/internal/scalars"
)

// curveCmds are `scalars ID` and `tensorboard ID -d DIR` for one kind of
// owner: path turns the ID argument into its API path (/v1/runs/ID,
// /v1/selfplay/CLUSTER/CONFIG).
func curveCmds(cf *clientFlags, arg, what string, path func(id string) (string, error)) []*cobra.Command {
	open := func(id string) (*apiclient.Client, string, error) {
		c, err := cf.client()
		if err != nil {
			return nil, "", err
		}
		p, err := path(id)
		return c, p, err
	}
	sc := &cobra.Command{
		Use:   "scalars " + arg + " [-o table|json|yaml|csv]",
		Short: what + "'s curves: per tag the steps and values (-o csv: its metrics.csv; -o json: tag → step, wall_time, value)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asCSV := cf.output == "csv"
			if asCSV {
				cf.output = "table"
			}
			c, p, err := open(args[0])
			if err != nil {
				return err
			}
			var out api.Scalars
			if err := c.JSON(cmd.Context(), http.MethodGet, p+"/scalars", nil, &out); err != nil {
				return err
			}
			if asCSV && len(out.Tags) == 0 { // no metrics.csv yet
				_, err := fmt.Fprintln(os.Stdout, "step,wall_time")
				return err
			}
			if asCSV {
				var b []byte
				if err := c.Do(cmd.Context(), http.MethodGet, p+"/tensorboard/"+scalars.CSVName, nil, "", &b); err != nil {
					return err
				}
				_, err := os.Stdout.Write(b)
				return err
			}
			return cf.print(os.Stdout, out, func(w *tabwriter.Writer) { scalarsTable(w, out) })
		},
	}

	var dir string
	tb := &cobra.Command{
		Use:   "tensorboard " + arg + " -d DIR",
		Short: "Download " + what + "'s TensorBoard event files and metrics.csv into DIR/" + arg + " (then: tensorboard --logdir DIR)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, p, err := open(args[0])
			if err != nil {
				return err
			}
			var list struct {
				Files []scalars.CurveFile `json:"files"`
			}
			if err := c.JSON(cmd.Context(), http.MethodGet, p+"/tensorboard", nil, &list); err != nil {
				return err
			}
			dst := filepath.Join(dir, filepath.FromSlash(args[0]))
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			keep := map[string]bool{}
			for _, f := range list.Files {
				var b []byte
				if err := c.Do(cmd.Context(), http.MethodGet, p+"/tensorboard/"+url.PathEscape(f.Name), nil, "", &b); err != nil {
					return err
				}
				if err := writeAtomic(filepath.Join(dst, f.Name), b); err != nil {
					return err
				}
				keep[f.Name] = true
			}
			// Event files an earlier download left that the log no longer
			// has (steps redone since) would show twice in TensorBoard.
			old, _ := filepath.Glob(filepath.Join(dst, "events.out.tfevents.*.trainyard"))
			for _, f := range old {
				if !keep[filepath.Base(f)] {
					if err := os.Remove(f); err != nil {
						return err
					}
				}
			}
			fmt.Fprintf(os.Stdout, "%d files in %s\n", len(list.Files), dst)
			fmt.Fprintf(os.Stderr, "view: tensorboard --logdir %s\n", dir)
			return nil
		},
	}
	tb.Flags().StringVarP(&dir, "dir", "d", "tensorboard", "directory to download into (each "+arg+" in a folder of its own)")
	return []*cobra.Command{sc, tb}
}

// writeAtomic writes b to name through a temporary file in the same
// directory: a TensorBoard watching it never reads half a file.
func writeAtomic(name string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".download-*")
	if err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil { // as any other download
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), name)
}

func scalarsTable(w *tabwriter.Writer, s api.Scalars) {
	tags := slices.Sorted(maps.Keys(s.Tags))
	fmt.Fprintln(w, "TAG\tPOINTS\tSTEPS\tLAST\tMIN\tMAX")
	for _, t := range tags {
		ps := s.Tags[t]
		if len(ps) == 0 {
			continue
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, p := range ps {
			lo, hi = min(lo, p.Value), max(hi, p.Value)
		}
		fmt.Fprintf(w, "%s\t%d\t%d..%d\t%.4g\t%.4g\t%.4g\n", t, len(ps), ps[0].Step, ps[len(ps)-1].Step, ps[len(ps)-1].Value, lo, hi)
	}
	if len(tags) == 0 {
		fmt.Fprintln(w, "(no curves yet)")
	}
	fmt.Fprintf(w, "\nS3 prefix: %s\n", strings.TrimSuffix(s.Prefix, "/"))
}

// scalarsRows lists a command run's newest reported scalars, one row per
// tag.
func scalarsRows(w *tabwriter.Writer, latest map[string]scalars.ScalarPoint) {
	tags := slices.Sorted(maps.Keys(latest))
	for _, t := range tags {
		p := latest[t]
		fmt.Fprintf(w, "scalar %s\t%.6g (step %d)\n", t, p.Value, p.Step)
	}
}
